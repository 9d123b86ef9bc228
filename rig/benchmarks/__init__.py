"""Benchmark registry: name -> "module:Class", imported only when asked for."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rig.benchmarks.base import Benchmark

BENCHMARKS: dict[str, str] = {
    "callnavi": "rig.benchmarks.callnavi.benchmark:CallNavi",
    "evgeoqa": "rig.benchmarks.evgeoqa.benchmark:EVGeoQA",
    "mobilitybench": "rig.benchmarks.mobilitybench.benchmark:MobilityBench",
    "routeeval": "rig.benchmarks.routeeval.benchmark:RouteEval",
    "urbangeo": "rig.benchmarks.urbangeo.benchmark:UrbanGeoEval",
}


def get_benchmark_class(name: str) -> "type[Benchmark]":
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}; available: {', '.join(sorted(BENCHMARKS))}")
    module, cls = BENCHMARKS[name].split(":")
    return getattr(importlib.import_module(module), cls)
