import asyncio
import json
import shutil
from pathlib import Path

import pytest

from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.execution.runner import plan, run_items
from rig.records import Sampling
from rig.render.report import report_markdown
from rig.runfolder.manifest import RunManifest, host_info
from rig.runfolder.store import Store
from rig.telemetry.gpu import GpuMemorySummary
from tests.execution.test_runner import oracle
from tests.fakes import FakeEngine


def make_run(tmp_path: Path, n_eps: int | None = None, engine: FakeEngine | None = None) -> Path:
    run_dir = tmp_path / "r1"
    run_dir.mkdir(parents=True)
    _spec, _w, bench, eps, cfg = _build_fake(n_eps)
    store = Store(run_dir / "results.sqlite")
    engine = engine or FakeEngine(oracle(bench), delay=0.002)
    asyncio.run(run_items(plan([(bench, eps)], 1), engine, store, RunContext(sampling=Sampling())))
    store.close()
    RunManifest(
        run_id="r1",
        config_hash=cfg.digest(),
        config=cfg,
        host=host_info(),
        started_at=0.0,
        status="finished",
        gpu_memory=GpuMemorySummary(available=False, reason="no --gpu given (CPU run)"),
    ).write(run_dir)
    return run_dir


def _build_fake(n_eps):  # type: ignore[no-untyped-def]
    from rig.registry import load_registry
    from rig.runfolder.config import BenchmarkInfo, RunConfig

    bench = CallNavi()
    eps = bench.episodes()[: n_eps or None]
    spec = load_registry().get("gemma3-270m")
    info = BenchmarkInfo(
        name="callnavi", version="1", data_path=str(bench.data), data_hash=bench.data_hash(), episodes=len(eps)
    )
    cfg = RunConfig(
        model=spec,
        benchmarks=[info],
        repeats=1,
        limit=None,
        decode="none",
        tool_mode="prompt",
        seed=0,
        temperature=0.0,
        max_tokens=8,
        gpu=None,
    )
    return spec, None, bench, eps, cfg


def test_report_has_table4_and_says_not_measured(tmp_path: Path) -> None:
    md = report_markdown(make_run(tmp_path))
    assert "### Tool-call forms" in md and "| bare |" in md  # the oracle answers in bare JSON (issue 35)
    assert "Every call read was in a form the reference reads." in md
    assert "CallNavi (layout of the paper's Table 4)" in md
    assert "| gemma3-270m | 1.000 | 1.000 | 1.000 | 1.000 |" in md
    assert "GPU memory peak (device used) | not measured (no --gpu given (CPU run))" in md
    assert "Decode speed median (tokens/s) | not measured" in md  # fake engine gave no decode speed
    assert "| 0.000" not in md.split("Latency, tokens, memory")[1]


def test_incomplete_run_is_flagged(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=6)
    man = RunManifest.read(run_dir)
    man.config.benchmarks[0].episodes = 10
    man.write(run_dir)
    md = report_markdown(run_dir)
    assert "Incomplete run: 4 episode(s) missing" in md


def cutting_engine(every: int) -> FakeEngine:
    """Right answers, but every ``every``-th reply stops mid-answer; finish reasons say which (0: none cut)."""
    right = oracle(CallNavi())
    n = {"i": 0}

    def answer(req):  # type: ignore[no-untyped-def]
        n["i"] += 1
        text = right(req)
        return text[: len(text) // 2] if every and n["i"] % every == 0 else text

    return FakeEngine(answer, finish=lambda text: "stop" if text.endswith(("]", "}")) else "length")


def test_replies_cut_at_max_tokens_are_counted_and_named(tmp_path: Path) -> None:
    md = report_markdown(make_run(tmp_path, n_eps=12, engine=cutting_engine(3)))
    assert "| Replies cut at max_tokens | 4 of 12 |" in md
    # per task: CallNavi caps routing replies at 128 tokens and params replies at 384
    assert "| routing | cut: at max_tokens (128), parse: json_error" in md
    assert "| params | cut: at max_tokens (384), parse: json_error" in md


def test_cut_replies_not_measured_when_the_engine_gives_no_finish_reason(tmp_path: Path) -> None:
    assert "| Replies cut at max_tokens | not measured |" in report_markdown(make_run(tmp_path, n_eps=4))


def _bench_with_fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict) -> tuple[Path, Path]:
    """A real `run_bench` over a copy of the CallNavi sample, answered by the oracle fake engine."""
    from rig.execution.bench import BenchOptions, run_bench

    data = tmp_path / "data"
    shutil.copytree(CallNavi.default_data(), data)
    monkeypatch.setattr("rig.execution.bench.resolve_weights", lambda spec, path: "x")
    monkeypatch.setattr(
        "rig.execution.bench.create_engine", lambda spec, weights, gpu=None: FakeEngine(oracle(CallNavi(data)))
    )
    run_dir = run_bench(
        BenchOptions(
            model="gemma3-270m", benchmark="callnavi", data=data, out=tmp_path / "runs", limit=6, options=options
        )
    )
    return run_dir, data


def test_report_works_on_a_run_folder_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, data = _bench_with_fake_engine(tmp_path, monkeypatch, {"paper_denominators": "yes"})
    before = report_markdown(run_dir)
    assert "Rates use the paper's denominators" in before  # the recorded option shapes the tables
    shutil.rmtree(data)
    after = report_markdown(run_dir)
    assert after == before
    from rig.render.html import html_report

    html = html_report([run_dir])
    assert "CallNavi (layout of the paper&#x27;s Table 4)" in html or "CallNavi (layout of the paper's Table 4)" in html
    assert "prompt unavailable" in html  # prompts are rebuilt from data only, and say so when it is gone


def test_manifest_records_defaults_and_old_manifests_report_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, data = _bench_with_fake_engine(tmp_path, monkeypatch, {"task": "routing"})
    man = RunManifest.read(run_dir)
    assert man.config.benchmarks[0].options == {
        "format": "json",
        "task": "routing",
        "paper_denominators": False,
        "domains": None,
        "mode": "paper",
    }
    new = report_markdown(run_dir)
    # a manifest written before typed options: -O strings as passed, plus the old settings field (no longer a field
    # of BenchmarkInfo, so it goes into the JSON as an older rig wrote it)
    man.config.benchmarks[0].options = {"task": "routing"}
    man.write(run_dir)
    raw = json.loads((run_dir / "manifest.json").read_text())
    raw["config"]["benchmarks"][0]["settings"] = {}
    (run_dir / "manifest.json").write_text(json.dumps(raw))
    shutil.rmtree(data)
    assert report_markdown(run_dir) == new


def test_routeeval_report_keeps_the_prompt_pack_facts_when_the_pack_file_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helsinki_pack: Path
) -> None:
    """The length bins and pack size come from the stored results' tags, not from the prompt file."""
    from rig.benchmarks.routeeval.benchmark import RouteEval
    from rig.execution.bench import BenchOptions, run_bench

    data = tmp_path / "mine.yaml"
    shutil.copy(RouteEval.default_data() / "helsinki.yaml", data)
    monkeypatch.setattr("rig.execution.bench.resolve_weights", lambda spec, path: "x")
    monkeypatch.setattr(
        "rig.execution.bench.create_engine", lambda spec, weights, gpu=None: FakeEngine(lambda req: "no route today")
    )
    run_dir = run_bench(
        BenchOptions(model="gemma3-270m", benchmark="routeeval", data=data, out=tmp_path / "runs", limit=3)
    )
    before = report_markdown(run_dir)
    assert "Short routes (0.75-1.5 miles)" in before and "3 prompt(s) of 12 in pack 'helsinki'" in before
    data.unlink()
    assert report_markdown(run_dir) == before
