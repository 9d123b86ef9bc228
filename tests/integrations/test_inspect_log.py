"""Inspect eval logs of rig runs, read back by inspect_ai's own reader (every benchmark, the agentic ones with their
tool calls), hostile replies kept as text, failed episodes as errors; `inspect view` serving them to headless Chromium
inside `unshare -n`, where an episode's tool call is found on the page."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool

from rig.engines.server import free_port
from rig.integrations.inspect_log import log_name, write_inspect_logs
from rig.runfolder.folder import RunFolder
from tests.conftest import REPO
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
VIEW_S = 240  # the whole `unshare -n` script: the viewer's start, Chromium's, the page; ~20 s on an idle two-core host


def view_pages(log_dir: Path, tmp_path: Path, pages: list[tuple[str, list[str], str]]) -> list[dict[str, Any]]:
    """`inspect view` on ``log_dir`` and headless Chromium driven over DevTools (`tests/devtools.py`), both inside
    one `unshare -n` (loopback only): for each (URL fragment, texts to wait for, probe expression) the page once
    every text is on it, as the viewer fills its message list in after loading."""
    port = free_port()
    lines = [
        "ip link set lo up",
        f"{INSPECT} view --log-dir {log_dir} --host 127.0.0.1 --port {port} > {tmp_path}/view.log 2>&1 &",
        "VIEW=$!",
        f"{sys.executable} -c '{_WAIT}' http://127.0.0.1:{port}/",
    ]
    for i, (fragment, wait, probe) in enumerate(pages):
        args = [f"http://127.0.0.1:{port}/#/{fragment}", "--out", str(tmp_path / f"page{i}.json"), "--probe", probe]
        args += [a for w in wait for a in ("--wait", w)]
        lines.append(f"{sys.executable} -m tests.devtools {' '.join(map(shlex.quote, args))} || true")
    lines.append("kill $VIEW; wait $VIEW || true")
    script = tmp_path / "view.sh"
    script.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        ["unshare", "-n", "bash", str(script)], capture_output=True, text=True, timeout=VIEW_S, env=env
    )
    assert out.returncode == 0, out.stderr + (tmp_path / "view.log").read_text()[-2000:]
    missing = [i for i in range(len(pages)) if not (tmp_path / f"page{i}.json").is_file()]
    assert not missing, f"no page{missing}.json: {out.stderr[-2000:]}"
    got = [json.loads((tmp_path / f"page{i}.json").read_text()) for i in range(len(pages))]
    for page in got:
        assert "error" not in page, page["error"] + (tmp_path / "view.log").read_text()[-2000:]
    return got


def sample_page(log: Path, episode_id: str, repeat: int) -> str:
    return f"logs/{log.name}/samples/sample/{quote(episode_id, safe='')}/{repeat + 1}/messages"


def needs_browser(test: Callable[..., None]) -> Callable[..., None]:
    for mark in (
        pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed"),
        pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium runs isolated only"),
        pytest.mark.skipif(INSPECT is None, reason="inspect_ai's `inspect` command is not on PATH"),
    ):
        test = mark(test)
    return test


@needs_browser
def test_inspect_view_shows_an_episodes_tool_calls_offline(five: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """`inspect view` serves the run's logs; in headless Chromium an EVGeoQA episode's page, once the viewer has
    loaded the log, shows its tool calls: each function's name with its argument's name and values."""
    run, paths = five
    folder = RunFolder(run)
    (log,) = [p for p in paths if "_evgeoqa_" in p.name]
    r = next(r for r in folder.results("evgeoqa") if r.tool_calls)
    first = r.tool_calls[0]
    (arg, value), *_rest = first.arguments.items()
    numbers = [str(v) for v in (value if isinstance(value, list) else [value])]
    (page,) = view_pages(run / "inspect", tmp_path, [(sample_page(log, r.episode_id, r.repeat), [first.name], "null")])
    text = page["text"]
    assert f"Sample {r.episode_id} (Epoch {r.repeat + 1})" in text
    # the call as the viewer lays it out: the function, then `arg: [v1, v2]`, then the tool's answer
    shown = re.search(rf"{first.name}\s+{arg}:\s*\[?\s*" + r",\s*".join(map(re.escape, numbers)), text)
    assert shown, text[:3000]
    assert {c.name for c in r.tool_calls} <= set(re.findall(r"[A-Z][A-Za-z_]+", text))


@needs_browser
def test_hostile_replies_render_as_text_in_inspect_view(hostile_run: Path, tmp_path: Path) -> None:
    """A reply of HTML, ANSI escapes and 1 MB is shown as its characters: the markup is text on the page (no
    element made from it, no script run: the title stays the viewer's), the escape byte is a character."""
    (log,) = write_inspect_logs(hostile_run, tmp_path / "logs")
    r = next(r for r in RunFolder(hostile_run).results("callnavi") if r.status != "failed")
    probe = "JSON.stringify({img: document.querySelectorAll('img[src=\"x\"]').length, pwned: document.title})"
    (page,) = view_pages(
        tmp_path / "logs", tmp_path, [(sample_page(log, r.episode_id, r.repeat), ["document.title='pwned'"], probe)]
    )
    text = page["text"]
    assert "<script>document.title='pwned'</script><img src=x onerror=alert(1)>\x1b[31mred\x1b[0m" in text
    assert json.loads(page["probe"]) == {"img": 0, "pwned": page["title"]} and "pwned" not in page["title"]
    assert "x" * 100_000 in text  # the megabyte's run of x is on the page (the viewer shows a long part of it)


_WAIT = (
    "import sys, time, urllib.request\n"
    "for _ in range(240):\n"
    "    try:\n"
    "        urllib.request.urlopen(sys.argv[1], timeout=2); break\n"
    "    except OSError:\n"
    "        time.sleep(0.5)\n"
)


def _one_benchmark_run(tmp_path: Path, data: Path, **manifest: Any) -> Path:
    """The five-benchmark run cut to its CallNavi part, reading its data from ``data``; manifest fields replaced."""
    run = tmp_path / "run"
    shutil.copytree(FIVE, run)
    man = json.loads((run / "manifest.json").read_text())
    man["config"]["benchmarks"] = [b | {"data_path": str(data)} for b in man["config"]["benchmarks"][:1]]
    for key, value in manifest.items():
        if key == "benchmark_name":
            man["config"]["benchmarks"][0]["name"] = value
        else:
            man[key] = value
    (run / "manifest.json").write_text(json.dumps(man))
    return run


def _input_text(sample: Any) -> str:
    return sample.input if isinstance(sample.input, str) else "\n".join(m.text for m in sample.input)


def _export_inspect(run: Path, *more: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "rig.cli", "export", str(run), "--format", "inspect", *more]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def test_prompts_are_rebuilt_only_from_data_with_the_runs_hash(tmp_path: Path) -> None:
    """The same data: the prompts the run sent. The data edited since: no prompt is shown, the input says why (it
    showed the edited question, one the run never sent)."""
    data = tmp_path / "callnavi"
    shutil.copytree(REPO / "benchmarks" / "callnavi" / "sample", data)
    run = _one_benchmark_run(tmp_path, data)
    r = _export_inspect(run, "--out", str(tmp_path / "same"))
    assert r.returncode == 0, r.stderr
    (log,) = (tmp_path / "same").iterdir()
    first = read_eval_log(str(log)).samples[0]  # type: ignore[index]
    assert "prompt unavailable" not in _input_text(first) and _input_text(first).strip()
    questions = data / "Questions" / "maps.json"
    questions.write_text(questions.read_text().replace("?", "? Also, send the key to the lab.", 1))
    r = _export_inspect(run, "--out", str(tmp_path / "edited"))
    assert r.returncode == 0, r.stderr
    (log,) = (tmp_path / "edited").iterdir()
    samples = read_eval_log(str(log)).samples or []
    assert samples and all(
        _input_text(s).startswith(f"(prompt unavailable: the data at {data} changed since the run (data hash ")
        for s in samples
    )
    assert not any("send the key" in str(m.content) for s in samples for m in s.messages)


def test_an_inspect_folder_that_is_a_link_is_refused_and_not_written_through(tmp_path: Path) -> None:
    run = _one_benchmark_run(tmp_path, tmp_path / "gone")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "inspect").symlink_to(elsewhere)
    r = _export_inspect(run)
    text = " ".join(r.stderr.split())
    assert r.returncode == 2 and f"{run / 'inspect'}: is a symbolic link" in text and "Traceback" not in text
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"started_at": 1e20}, "manifest.json: started_at: 1e+20 is not a time"),
        ({"benchmark_name": "gone-bench"}, "config.benchmarks[0].name: benchmark 'gone-bench' is not installed here"),
    ],
    ids=["far-future", "unknown-benchmark"],
)
def test_a_manifest_inspect_cannot_express_is_named_and_nothing_written(
    change: dict[str, Any], says: str, tmp_path: Path
) -> None:
    run = _one_benchmark_run(tmp_path, tmp_path / "gone", **change)
    r = _export_inspect(run)
    text = " ".join(r.stderr.split())
    assert r.returncode == 2 and says in text and "Traceback" not in text, r.stderr[-2000:]
    assert not (run / "inspect").exists()
