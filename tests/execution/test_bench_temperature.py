"""A benchmark that samples at its own temperature (MobilityBench, the paper's 0.1) is not reached by the run's
``--temperature``: rig says so at the start of the run, naming the option that does reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import Benchmark
from rig.execution.bench import BenchOptions, run_bench, temperature_warnings
from rig.records import Episode
from rig.runfolder.folder import RunFolder
from tests.execution.conftest import ATTACHED_MODELS


def _chosen(name: str, **options: str) -> list[tuple[Benchmark, list[Episode]]]:
    bench = get_benchmark_class(name)(None, {"similarity": "jaccard", **options} if name == "mobilitybench" else {})
    return [(bench, [])]


def test_only_a_benchmark_with_its_own_temperature_is_warned_about() -> None:
    (line,) = temperature_warnings(_chosen("mobilitybench"), 0.7)
    assert line == (
        "warning: --temperature 0.7 does not reach mobilitybench: its episodes sample at its option "
        "temperature=0.1; set -O mobilitybench.temperature=0.7 to change it"
    )
    assert temperature_warnings(_chosen("mobilitybench", temperature="0.7"), 0.7) == []
    assert temperature_warnings(_chosen("mobilitybench"), None) == []  # the flag not given: nothing was asked
    assert temperature_warnings(_chosen("routeeval"), 0.7) == []


def test_a_run_says_the_flag_did_not_reach_mobilitybench(
    attached: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models.yaml").write_text(ATTACHED_MODELS.format(url=attached))
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    said: list[str] = []
    opts = BenchOptions(
        model="attached", benchmark="mobilitybench", limit=1, temperature=0.7, options={"similarity": "jaccard"},
        models_file=tmp_path / "models.yaml", out=tmp_path / "runs", idle_window_s=0.0,
    )  # fmt: skip
    run_dir = run_bench(opts, on_event=said.append)
    assert RunFolder(run_dir).manifest.status == "finished"
    assert [m for m in said if m.startswith("warning: --temperature")] == [
        "warning: --temperature 0.7 does not reach mobilitybench: its episodes sample at its option "
        "temperature=0.1; set -O mobilitybench.temperature=0.7 to change it"
    ]
