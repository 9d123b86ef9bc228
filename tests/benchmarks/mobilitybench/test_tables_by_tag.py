"""Pins MobilityBench's per-family and per-scenario tables where the stored fixture cannot: repeats and a second
framework (a family counts episodes, a scenario counts runs)."""

from __future__ import annotations

from pathlib import Path

from rig.benchmarks.mobilitybench.tables import mobility_tables
from rig.runformat import read_results

FIXTURE = Path(__file__).parents[2] / "fixtures" / "run_before_issue17" / "results.sqlite"
ROUTE = [0.0, 0.0, 0.5, 1.0, 0.5, 0.09999999999999998, 1.0, 0.0, 0.0, 25970.0, 402.0]


def test_family_counts_episodes_scenario_counts_runs() -> None:
    once = [r for r in read_results(FIXTURE) if r.benchmark == "mobilitybench"]
    results = [
        *once,
        *(r.model_copy(update={"repeat": 1}) for r in once),
        *(r.model_copy(update={"repeat": 2, "tags": {**r.tags, "framework": "plan"}}) for r in once[:1]),
    ]
    tables = {t.title: t for t in mobility_tables(results, "m")}
    family = tables["MobilityBench by intent family (paper mode)"]
    assert family.columns[:3] == ["Framework", "Intent family", "Episodes"]
    assert [row[:3] for row in family.rows] == [
        ["ReAct", "Basic Information Retrieval", 1],
        ["ReAct", "Preference-Constrained Route Planning", 1],
        ["Plan-and-Execute", "Preference-Constrained Route Planning", 1],
    ]
    assert family.rows[1][3:] == ROUTE and family.rows[2][3:] == ROUTE
    scenario = tables["MobilityBench by scenario (paper mode)"]
    assert scenario.columns == ["Framework", "Scenario", "Runs", "DR", "FPR"]
    assert scenario.rows == [
        ["ReAct", "Traffic Info Query", 2, 0.0, 0.0],
        ["ReAct", "Option-Constrained Route Planning", 2, 0.0, 0.0],
        ["Plan-and-Execute", "Option-Constrained Route Planning", 1, 0.0, 0.0],
    ]
