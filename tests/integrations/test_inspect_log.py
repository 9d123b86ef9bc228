"""Inspect eval logs of rig runs, read back by inspect_ai's own reader (every benchmark, the agentic ones with their
tool calls), hostile replies kept as text, failed episodes as errors; `inspect view` serving them to headless Chromium
inside `unshare -n`, where an episode's tool call is found on the page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool

from rig.engines.server import free_port
from rig.integrations.inspect_log import log_name, write_inspect_logs
from rig.runfolder.folder import RunFolder
from tests.render.test_html import CHROMIUM, _can_isolate

FIVE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"  # a real five-benchmark run of the embedded model


@pytest.fixture(scope="module")
def five(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    run = tmp_path_factory.mktemp("five") / "run"
    shutil.copytree(FIVE, run)
    return run, write_inspect_logs(run)


def test_every_benchmark_round_trips_through_inspects_reader(five: tuple[Path, list[Path]]) -> None:
    run, paths = five
    folder = RunFolder(run)
    assert [p.name for p in paths] == [log_name(folder, b.name) for b in folder.benchmarks]
    assert all(p.parent == run / "inspect" for p in paths)
    tool_turns = 0
    for b, path in zip(folder.benchmarks, paths, strict=True):
        log = read_eval_log(str(path))
        results = folder.results(b.name)
        summary = folder.summary(b.name)
        assert log.status == "success" and log.eval.task == b.name and log.eval.run_id == folder.manifest.run_id
        assert log.eval.model == "rig/gemma3-270m" and log.eval.model_args["quantization"] == "q4_k_m"
        assert log.eval.dataset.samples == b.episodes and log.eval.dataset.location == b.data_path
        assert log.eval.model_generate_config.max_tokens == folder.manifest.config.max_tokens
        assert log.eval.metadata["tool_mode"] == folder.manifest.config.tool_mode
        assert summary.headline is not None
        (score,) = log.results.scores
        if summary.headline.mean is not None:
            assert score.metrics["mean"].value == summary.headline.mean
            assert score.metrics["ci_low"].value == summary.headline.low
        assert log.samples is not None and len(log.samples) == len(results)
        headline = summary.headline.by_episode()
        for s, r in zip(log.samples, results, strict=True):
            assert (s.id, s.epoch) == (r.episode_id, r.repeat + 1)
            scores = {k: v.value for k, v in (s.scores or {}).items()}
            assert scores.pop("headline", None) == headline.get((r.episode_id, r.repeat))
            assert scores == {k: v for k, v in r.scores.items() if v is not None}
            turns = [m for m in s.messages if isinstance(m, ChatMessageAssistant)]
            assert [m.text for m in turns] == [g.text for g in r.generations]
            assert s.output.completion == r.generations[-1].text
            if r.tool_calls:  # executed calls: in order, each answered by a tool message
                calls = [c for m in turns for c in (m.tool_calls or [])]
                assert [(c.function, c.arguments) for c in calls] == [(c.name, c.arguments) for c in r.tool_calls]
                answers = [m for m in s.messages if isinstance(m, ChatMessageTool)]
                assert [m.tool_call_id for m in answers] == [c.id for c in calls]
                for m, c in zip(answers, r.tool_calls, strict=True):
                    want = c.error if c.error is not None else json.dumps(c.answer, ensure_ascii=False, default=str)
                    if not isinstance(c.answer, str) or c.error is not None:
                        assert m.text == want
                    assert (m.error is not None) == (c.error is not None or c.verdict == "invalid")
                tool_turns += len(answers)
            usage = s.model_usage["gemma3-270m"]
            assert usage.input_tokens == sum(g.prompt_tokens or 0 for g in r.generations)
            assert usage.output_tokens == sum(g.completion_tokens or 0 for g in r.generations)
            assert s.total_time == pytest.approx(r.finished_at - r.started_at)
    assert tool_turns >= 4  # the agentic benchmarks (EVGeoQA, MobilityBench) carried their tool answers across


HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>\x1b[31mred\x1b[0m **bold** "


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.fakes import FakeEngine
    from tests.render.test_report import make_run

    big = HOSTILE + "x" * (1 << 20)
    return make_run(
        tmp_path_factory.mktemp("hostile"), n_eps=6, engine=FakeEngine(lambda _r: big, fail_on="names only")
    )


def test_hostile_replies_survive_as_text_and_failures_as_errors(hostile_run: Path, tmp_path: Path) -> None:
    (path,) = write_inspect_logs(hostile_run, tmp_path / "logs")
    log = read_eval_log(str(path))
    results = RunFolder(hostile_run).results("callnavi")
    failed = [r for r in results if r.status == "failed"]
    assert failed and len(failed) < len(results)
    for s, r in zip(log.samples or [], results, strict=True):
        if r.status == "failed":
            assert s.error is not None and s.error.message == r.error
        else:
            assert s.error is None
            assert s.output.completion == HOSTILE + "x" * (1 << 20)  # byte for byte, 1 MB included


INSPECT = shutil.which("inspect")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium is not run un-isolated")
@pytest.mark.skipif(INSPECT is None, reason="inspect_ai's `inspect` command is not on PATH")
def test_inspect_view_opens_the_runs_logs_offline(five: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """`inspect view` serves the run's logs and headless Chromium opens an EVGeoQA episode, both inside one
    `unshare -n` (loopback only): the viewer lists the log and opens the episode by its id and epoch. (Its message
    list is not checked here: the viewer fills it after `--dump-dom` has returned.)"""
    run, paths = five
    folder = RunFolder(run)
    (log,) = [p for p in paths if "_evgeoqa_" in p.name]
    r = next(r for r in folder.results("evgeoqa") if r.tool_calls)
    port = free_port()
    url = f"http://127.0.0.1:{port}/#/logs/{log.name}/samples/sample/{r.episode_id}/{r.repeat + 1}/messages"
    chrome = (
        f"{CHROMIUM} --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions "
        "--disable-background-networking --disable-component-update --disable-sync "
        f"--user-data-dir={tmp_path / 'profile'} --virtual-time-budget=20000 --window-size=1400,1000"
    )
    script = tmp_path / "view.sh"
    script.write_text(
        "set -e\nip link set lo up\n"
        f"{INSPECT} view --log-dir {run / 'inspect'} --host 127.0.0.1 --port {port} > {tmp_path}/view.log 2>&1 &\n"
        "VIEW=$!\n"
        f"{sys.executable} -c '{_WAIT}' http://127.0.0.1:{port}/\n"
        f"{chrome} --dump-dom '{url}' > {tmp_path}/dom.html 2> {tmp_path}/chrome.log\n"
        f"{chrome} --screenshot={tmp_path}/inspect.png '{url}' >/dev/null 2>&1 || true\n"
        "kill $VIEW; wait $VIEW || true\n"
    )
    out = subprocess.run(["unshare", "-n", "bash", str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr + (tmp_path / "view.log").read_text()[-2000:]
    text = " ".join(re.sub(r"<[^>]+>", " ", (tmp_path / "dom.html").read_text()).split())
    assert f"Sample {r.episode_id} (Epoch {r.repeat + 1})" in text, text[-2000:]
    assert (tmp_path / "inspect.png").stat().st_size > 10_000


_WAIT = (
    "import sys, time, urllib.request\n"
    "for _ in range(240):\n"
    "    try:\n"
    "        urllib.request.urlopen(sys.argv[1], timeout=2); break\n"
    "    except OSError:\n"
    "        time.sleep(0.5)\n"
)
