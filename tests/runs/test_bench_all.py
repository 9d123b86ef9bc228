"""`rig bench` without --benchmark: every benchmark with data, one run, skipped ones named with the reason."""

from pathlib import Path

import pytest

from rig import benchmarks
from rig.benchmarks.base import DataError
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.runs.bench import BenchError, BenchOptions, _build


class NoData(CallNavi):
    name = "nodata"

    @classmethod
    def default_data(cls) -> Path:
        raise DataError("nodata: map pack not built (run rig maps build)")


def test_all_benchmarks_skips_those_without_data(monkeypatch: pytest.MonkeyPatch, embedded_weights: str) -> None:
    monkeypatch.setitem(benchmarks.BENCHMARKS, "nodata", f"{__name__}:NoData")
    _spec, _w, chosen, cfg, skipped = _build(BenchOptions(model="gemma3-270m", limit=2))
    assert [b.name for b, _ in chosen] == ["callnavi"] and [b.name for b in cfg.benchmarks] == ["callnavi"]
    assert skipped == ["nodata: nodata: map pack not built (run rig maps build)"]
    with pytest.raises(DataError, match="map pack not built"):  # named explicitly: an error, not a skip
        _build(BenchOptions(model="gemma3-270m", benchmark="nodata"))
    with pytest.raises(BenchError, match="--data names one benchmark"):
        _build(BenchOptions(model="gemma3-270m", data=Path("x")))
