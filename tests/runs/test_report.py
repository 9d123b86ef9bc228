import asyncio
from pathlib import Path

from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.records import Sampling
from rig.runs.manifest import RunManifest, host_info
from rig.runs.report import report_markdown
from rig.runs.runner import plan, run_items
from rig.runs.store import Store
from rig.telemetry.gpu import GpuMemorySummary
from tests.fakes import FakeEngine

from .test_runner import oracle


def make_run(tmp_path: Path, n_eps: int | None = None, engine: FakeEngine | None = None) -> Path:
    run_dir = tmp_path / "r1"
    run_dir.mkdir(parents=True)
    spec, _w, bench, eps, cfg = _build_fake(n_eps)
    store = Store(run_dir / "results.sqlite")
    engine = engine or FakeEngine(oracle(bench), delay=0.002)
    asyncio.run(run_items(plan([(bench, eps)], 1), engine, store, RunContext(sampling=Sampling())))
    store.close()
    RunManifest(run_id="r1", config_hash=cfg.digest(), config=cfg, host=host_info(), started_at=0.0,
                status="finished", gpu_memory=GpuMemorySummary(available=False, reason="no --gpu given (CPU run)")
                ).write(run_dir)
    return run_dir


def _build_fake(n_eps):  # type: ignore[no-untyped-def]
    from rig.registry import load_registry
    from rig.runs.config import BenchmarkInfo, RunConfig

    bench = CallNavi()
    eps = bench.episodes()[: n_eps or None]
    spec = load_registry().get("gemma3-270m")
    info = BenchmarkInfo(name="callnavi", version="1", data_path=str(bench.data), data_hash=bench.data_hash(),
                         episodes=len(eps))
    cfg = RunConfig(model=spec, benchmarks=[info], repeats=1, limit=None, decode="none", tool_mode="prompt", seed=0,
                    temperature=0.0, max_tokens=8, gpu=None)
    return spec, None, bench, eps, cfg


def test_report_has_table4_and_says_not_measured(tmp_path: Path) -> None:
    md = report_markdown(make_run(tmp_path))
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
