"""RouteEval with the embedded Gemma 3 270M on CPU: every run ends in a score or a classified error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rig.benchmarks.base import RunContext
from rig.benchmarks.routeeval.benchmark import RouteEval
from rig.benchmarks.routeeval.scoring import ERRORS
from rig.records import Sampling

pytestmark = pytest.mark.model


@pytest.mark.parametrize("mode", ["native", "json", "yaml"])
def test_every_run_is_scored_or_classified(
    gemma_engine,
    helsinki_pack: Path,  # type: ignore[no-untyped-def]
    mode: str,
) -> None:
    bench = RouteEval()
    eps = [e for e in bench.episodes() if e.id in ("hel-01", "hel-03")]
    ctx = RunContext(sampling=Sampling(temperature=0.7, max_tokens=96, seed=0), tool_mode=mode)
    for ep in eps:
        for repeat in range(2):
            r = asyncio.run(bench.run_episode(ep, gemma_engine, ctx, repeat))
            g = r.generations[0]
            assert g.error is None, g.error
            assert r.status == "scored"
            assert 0.0 <= r.scores["accuracy"] <= 1.0 and r.scores["success"] in (0.0, 1.0)
            if r.scores["success"]:
                assert r.error_category is None and r.scores["d_actual_mi"] is not None
            else:
                assert r.error_category in ERRORS, (r.error_category, r.error, g.text[:300])
            if mode in ("json", "yaml") and g.finish_reason == "stop":
                # a complete constrained call always parses: only the map or the distance can fail it
                assert r.error_category not in ("tool_calling_failure", "invalid_route_type"), (r.error, g.text)
