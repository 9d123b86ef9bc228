"""EVGeoQA with the embedded Gemma 3 270M on CPU: every episode ends with scores or a classified failure."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rig.benchmarks.base import RunContext
from rig.benchmarks.evgeoqa.benchmark import EVGeoQA
from rig.benchmarks.evgeoqa.scoring import CAUSES
from rig.records import Sampling

pytestmark = pytest.mark.model


@pytest.mark.parametrize("mode", ["json", "prompt"])
def test_every_episode_is_scored_or_classified(gemma_engine, helsinki_pack: Path, mode: str) -> None:  # type: ignore[no-untyped-def]
    bench = EVGeoQA(options={"locations": "2", "max_steps": "4", "max_tokens": "96"})
    eps = bench.episodes()
    picked = [
        next(e for e in eps if e.tags["reachable"] == "true"),
        next(e for e in eps if e.tags["reachable"] == "false"),
    ]
    ctx = RunContext(sampling=Sampling(temperature=0.0, max_tokens=96, seed=0), tool_mode=mode)
    for ep in picked:
        r = asyncio.run(bench.run_episode(ep, gemma_engine, ctx, 0))
        assert all(g.error is None for g in r.generations), [g.error for g in r.generations]
        assert r.status == "scored"
        assert all(r.scores[f"hits@{k}"] in (0.0, 1.0) for k in (1, 2, 3))
        assert r.scores["hits@1"] <= r.scores["hits@2"] <= r.scores["hits@3"]
        assert 1 <= len(r.generations) <= 4 + 3 + 1  # steps plus re-prompts
        assert all(g.completion_tokens is None or g.completion_tokens <= 96 for g in r.generations)
        assert r.tags["stop"] in ("final", "max_steps", "format_errors") and r.tags["max_steps"] == "4"
        if r.scores["hits@3"]:
            assert r.error_category is None
        else:
            assert r.error_category in CAUSES, (r.error_category, r.error)
        for c in r.tool_calls:  # every call the model made is either answered or a categorised tool error
            assert c.verdict == "valid" or c.error_category, c
