import asyncio
from pathlib import Path

from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.records import Sampling
from rig.runs.report import report_markdown
from rig.runs.runner import plan, run_items
from rig.runs.store import Store
from rig.telemetry.gpu import GpuMemorySummary
from rig.telemetry.manifest import RunManifest, host_info
from tests.fakes import FakeEngine

from .test_runner import oracle


def make_run(tmp_path: Path, n_eps: int | None = None) -> Path:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    spec, _w, bench, eps, cfg = _build_fake(n_eps)
    store = Store(run_dir / "results.sqlite")
    asyncio.run(run_items(plan([(bench, eps)], 1), FakeEngine(oracle(bench), delay=0.002), store, RunContext(sampling=Sampling())))
    store.close()
    RunManifest(run_id="r1", config_hash=cfg.digest(), config=cfg, host=host_info(), started_at=0.0,
                status="finished", gpu_memory=GpuMemorySummary(available=False, reason="no --gpu given (CPU run)")
                ).write(run_dir)
    return run_dir


def _build_fake(n_eps):  # type: ignore[no-untyped-def]
    from rig.registry import load_registry
    from rig.telemetry.manifest import BenchmarkInfo, RunConfig

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
