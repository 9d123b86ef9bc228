"""`rig bench` without --benchmark: every benchmark with data, one run, skipped ones named with the reason."""

from pathlib import Path

import pytest

from rig import plugins
from rig.benchmarks.base import DataError
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.execution.bench import BenchError, BenchOptions, _build


class NoData(CallNavi):
    name = "nodata"

    @classmethod
    def default_data(cls) -> Path:
        raise DataError("nodata: map pack not built (run rig maps build)")


# registered as rig's own are: a lazy entry in the one registry
NODATA = plugins.Plugin(plugins.BENCHMARK_GROUP, "nodata", f"{__name__}:NoData", "rig", builtin=True)


def test_all_benchmarks_skips_those_without_data(monkeypatch: pytest.MonkeyPatch, embedded_weights: str) -> None:
    # only the embedded-data benchmark and the one without data: the map benchmarks are tested on their own
    monkeypatch.setattr(plugins, "BENCHMARKS", {"callnavi": plugins.BENCHMARKS["callnavi"], "nodata": NODATA})
    _spec, _w, chosen, cfg, skipped = _build(BenchOptions(model="gemma3-270m", limit=2))
    assert [b.name for b, _ in chosen] == ["callnavi"] and [b.name for b in cfg.benchmarks] == ["callnavi"]
    assert skipped == ["nodata: nodata: map pack not built (run rig maps build)"]
    with pytest.raises(DataError, match="map pack not built"):  # named explicitly: an error, not a skip
        _build(BenchOptions(model="gemma3-270m", benchmark="nodata"))
    with pytest.raises(BenchError, match="--data names one benchmark"):
        _build(BenchOptions(model="gemma3-270m", data=Path("x")))


def test_options_are_routed_per_benchmark(monkeypatch: pytest.MonkeyPatch, embedded_weights: str) -> None:
    monkeypatch.setattr(plugins, "BENCHMARKS", {"callnavi": plugins.BENCHMARKS["callnavi"], "nodata": NODATA})
    _s, _w, chosen, cfg, _sk = _build(
        BenchOptions(model="gemma3-270m", limit=2, options={"callnavi.task": "routing", "callnavi.format": "yaml"})
    )
    assert cfg.benchmarks[0].options == {
        "task": "routing",
        "format": "yaml",
        "paper_denominators": False,
        "domains": None,
        "mode": "paper",
    }
    assert chosen[0][0].opts.format == "yaml"
    with pytest.raises(BenchError, match="without --benchmark, name the benchmark it is for"):
        _build(BenchOptions(model="gemma3-270m", options={"task": "routing"}))
    # one benchmark named: a bare key is its own, a key for another benchmark is refused
    _s, _w, chosen, cfg, _sk = _build(
        BenchOptions(model="gemma3-270m", benchmark="callnavi", limit=2, options={"task": "routing"})
    )
    assert cfg.benchmarks[0].options == {
        "task": "routing",
        "format": "json",
        "paper_denominators": False,
        "domains": None,
        "mode": "paper",
    }
    with pytest.raises(BenchError, match="does not include benchmark 'nodata'"):
        _build(BenchOptions(model="gemma3-270m", benchmark="callnavi", options={"nodata.x": "1"}))


def test_manifest_records_effective_options(helsinki_pack: Path, embedded_weights: str) -> None:
    """A step budget left at its default is still in the run record: options are the validated model."""
    _s, _w, _chosen, cfg, _sk = _build(
        BenchOptions(model="gemma3-270m", benchmark="evgeoqa", limit=1, options={"max_format_errors": "2"})
    )
    info = cfg.benchmarks[0]
    assert {k: info.options[k] for k in ("max_steps", "max_format_errors", "max_tokens")} == {
        "max_steps": 20,
        "max_format_errors": 2,
        "max_tokens": 512,
    }
    assert "settings" not in info.model_dump()  # the field old manifests wrote; new runs record everything in options
    _s, _w, _chosen, cfg, _sk = _build(
        BenchOptions(model="gemma3-270m", benchmark="mobilitybench", limit=1, options={"similarity": "jaccard"})
    )
    assert cfg.benchmarks[0].options["max_steps"] == 10 and cfg.benchmarks[0].options["framework"] == "react"
