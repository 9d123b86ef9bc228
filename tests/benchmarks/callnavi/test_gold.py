"""CallNavi's gold against the grammar a run sends: a gold answer outside the grammar's bounds (a lab's data with a
longer value than the upstream's) is tagged on each constrained result, and the report states the ceiling it puts on
the scores beside them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.records import Sampling
from tests.fakes import FakeEngine


def _data(root: Path) -> Path:
    (root / "Questions").mkdir(parents=True)
    (root / "APIs").mkdir()

    def q(qid: str, value: str) -> dict:
        return {
            "id": qid,
            "question": [{"role": "user", "content": qid}],
            "ground_truth": {"API": ["getX"], "parameters": [{"k": value}]},
            "difficulty": "easy",
        }

    (root / "Questions" / "bank.json").write_text(json.dumps([q("short", "v"), q("long", "v" * 40)]))
    (root / "APIs" / "bank.json").write_text(json.dumps({"api_ports": [{"name": "getX", "parameters": {"k": "s"}}]}))
    return root


def _run(bench: CallNavi, decode: str) -> list:
    engine = FakeEngine(lambda _r: '{"API": ["getX"], "parameters": [{"k": "v"}]}')
    ctx = RunContext(sampling=Sampling(), decode=decode)
    return [asyncio.run(bench.run_episode(ep, engine, ctx, 0)) for ep in bench.episodes()]


def test_the_report_states_the_ceiling_a_grammar_bound_puts_on_the_scores(tmp_path: Path) -> None:
    bench = CallNavi(_data(tmp_path), {"format": "json"})
    results = _run(bench, "json")
    admitted = {r.episode_id: r.tags["gold_admitted"] for r in results}
    assert admitted == {"short/routing": "yes", "short/params": "yes", "long/routing": "yes", "long/params": "no"}
    note = CallNavi.tables(results, bench.opts)[0].note
    assert "Ceiling: 1 of 2 params gold answers lie outside the answer grammar's bounds" in note
    assert "cannot exceed 0.500" in note and "routing gold" not in note


def test_no_ceiling_unconstrained(tmp_path: Path) -> None:
    bench = CallNavi(_data(tmp_path), {"format": "json"})
    results = _run(bench, "none")
    assert all("gold_admitted" not in r.tags for r in results)
    assert "Ceiling" not in CallNavi.tables(results, bench.opts)[0].note
