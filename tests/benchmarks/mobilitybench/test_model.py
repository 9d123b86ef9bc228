"""MobilityBench with the real embedded Gemma 3 270M on CPU, both frameworks, a few episodes: every episode ends
with scores or a classified failure (the model is weak at tool calling; that is expected)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import RunContext
from rig.benchmarks.mobilitybench.scoring import METRICS
from rig.records import Sampling

pytestmark = pytest.mark.model


@pytest.mark.parametrize("framework", ["react", "plan"])
def test_gemma_episodes_end_scored_or_classified(helsinki_pack: Path, gemma_engine, framework: str) -> None:  # type: ignore[no-untyped-def]
    bench = get_benchmark_class("mobilitybench")(
        None, {"framework": framework, "similarity": "jaccard", "max_steps": "3"}
    )
    eps = [e for e in bench.episodes() if e.id in ("mb-weather-01", "mb-p2p-01")]
    ctx = RunContext(sampling=Sampling(max_tokens=64), tool_mode="prompt")
    results = [asyncio.run(bench.run_episode(e, gemma_engine, ctx, 0)) for e in eps]
    for r in results:
        assert r.status in ("scored", "failed")
        assert all(m in r.scores for m in METRICS)
        assert r.scores["FPR"] == 1.0 or r.error_category is not None
        assert r.scores["IT"] and r.scores["IT"] > 0  # tokens measured by the engine
        assert r.tags["max_tokens"] == "64" and r.tags["temperature"] == "0.1"
        assert len([g for g in r.generations]) <= 3 + 2 * 3  # step budget (plus format re-prompts)
    assert bench.tables(results, bench.opts, label="gemma3-270m")[0].rows
