"""EVGeoQA's gold and anti-gold agents through `rig selftest`'s library API: in every tool mode gold reaches Hits@1/2/3
of 1 with no argument, area or format error, anti-gold 0, on each distance tier; and gold gets there by finding the
stations with the tools, not by naming them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rig.agents.scripted import ScriptedEngine
from rig.benchmarks.base import RunContext
from rig.benchmarks.evgeoqa.benchmark import EVGeoQA
from rig.benchmarks.evgeoqa.tools import CAL_DISTANCE, CHANGE_LOCATION, FINAL, SEARCH_POIS, SEARCH_STATIONS
from rig.decoding.accept import acceptors
from rig.execution.selftest import SelftestOptions, SelftestReport, run_selftest
from rig.records import Sampling

# Radii small enough that the embedded pack's queries fall in all three tiers (the default radii leave tier 3 empty).
SMALL = {"search_radius_m": 150, "walk_radius_m": 60}


def _selftest(options: dict[str, object], limit: int) -> SelftestReport:
    found, _ = acceptors(None)  # llguidance and xgrammar: every constrained reply is checked by a grammar engine
    opts = SelftestOptions(benchmarks=["evgeoqa"], options={"evgeoqa": options}, limit=limit)
    return run_selftest(opts, found)


def _tiers(options: dict[str, object], limit: int) -> set[str]:
    return {e.tags["tier"] for e in EVGeoQA(None, options).episodes()[:limit]}


def test_gold_reaches_every_bound_in_every_tool_mode_and_tier(helsinki_pack: Path) -> None:
    limit = 24
    assert _tiers(SMALL, limit) == {"1", "2", "3"}
    report = _selftest(SMALL, limit)
    (bench,) = report.benchmarks
    assert bench.status == "ran"
    assert {m.mode.tool_mode for m in bench.modes} == {"native", "prompt", "json", "yaml"}
    for mode in bench.modes:
        assert mode.error is None and mode.episodes == limit and not mode.unavailable, mode.mode.label
        assert not mode.shortfalls, (mode.mode.label, mode.shortfalls[:3])
        lines = {m.metric: m for m in mode.metrics}
        for k in ("hits@1", "hits@2", "hits@3"):
            assert (lines[k].gold, lines[k].anti, lines[k].verdict) == (1.0, 0.0, "ok"), (mode.mode.label, k)
        for k in ("argument_errors", "out_of_area", "format_errors"):
            assert (lines[k].gold, lines[k].verdict) == (0.0, "ok"), (mode.mode.label, k)
    assert report.ok


def test_gold_finds_the_stations_with_the_tools(helsinki_pack: Path) -> None:
    """A tier-2 query: gold moves, searches, checks the places and the distance of each station, and names only
    stations the tools showed; every call is valid and answered."""
    bench = EVGeoQA(None, {})
    ep = next(e for e in bench.episodes() if e.tags["tier"] == "2" and len(e.ground_truth["query"]["answers"]) > 1)
    answers = [a["station_id"] for a in ep.ground_truth["query"]["answers"]]
    engine = ScriptedEngine()
    for mode in ("native", "yaml"):
        ctx = RunContext(sampling=Sampling(), tool_mode=mode)
        engine.play(bench.gold(ep, ctx))
        res = asyncio.run(bench.run_episode(ep, engine, ctx, 0))
        names = [c.name for c in res.tool_calls]
        assert names[0] == CHANGE_LOCATION and names[-1] == FINAL, names
        assert {SEARCH_STATIONS, SEARCH_POIS, CAL_DISTANCE} <= set(names)
        assert all(c.verdict == "valid" for c in res.tool_calls), [c.error for c in res.tool_calls]
        shown = {s["station_id"] for c in res.tool_calls if c.name == SEARCH_STATIONS for s in c.answer or []}
        assert res.output["final"] == answers[:3] and set(answers[:3]) <= shown
        assert res.error_category is None and res.scores["hits@1"] == 1.0


def test_anti_gold_is_well_formed_and_wrong(helsinki_pack: Path) -> None:
    bench = EVGeoQA(None, {})
    engine = ScriptedEngine()
    ctx = RunContext(sampling=Sampling(), tool_mode="json")
    for ep in bench.episodes()[:5]:
        engine.play(bench.anti_gold(ep, ctx))
        res = asyncio.run(bench.run_episode(ep, engine, ctx, 0))
        assert res.tags["stop"] == "final" and res.scores["format_errors"] == 0 and not engine.rejections
        assert res.scores["hits@3"] == 0.0 and res.error_category is not None


def test_upstream_answer_no_agent_can_find_is_gold_unavailable(tmp_path: Path) -> None:
    """Upstream data: an answer station missing from Stations.json (the importer adds it without POIs) or one whose
    place the station's POI list lacks cannot be found by exploring. A query with another answer is played without
    it; a query left with none is a "gold unavailable" line naming the files and the field, and the run goes on."""
    from tests.benchmarks.evgeoqa.test_importer import USER, _answer, write_upstream

    def question(qid: int, answers: list[dict]) -> dict:
        return {
            "Question_id": qid,
            "Question": "我想吃饭顺便充电",
            "Question_location_cord": USER,
            "Question_poi": "中餐厅;中餐厅",
            "Answer": answers,
        }

    missing = _answer("A9", [30.45, 120.31], 15.5, "饭店")  # no such station in the table
    a1 = [30.440093, 120.304083]
    qa = [
        question(11, [missing, _answer("A1", a1, 16.2, "面馆")]),
        question(13, [missing, _answer("A1", a1, 16.2, "别的")]),  # A1 lists 面馆 only
    ]
    data = write_upstream(tmp_path, qa=qa)
    found, _ = acceptors(None)
    opts = SelftestOptions(benchmarks=["evgeoqa"], data=data, options={"evgeoqa": {"city": "Hangzhou"}})
    report = run_selftest(opts, found)
    for mode in report.benchmarks[0].modes:
        assert mode.error is None and not mode.shortfalls, (mode.mode.label, mode.shortfalls)
        (line,) = mode.unavailable
        assert line.startswith(f"13: {data / 'QA_Pairs.json'}: Question_id 13.Answer: ") and "Stations.json" in line
        hits = {m.metric: m for m in mode.metrics}["hits@1"]
        assert (hits.gold, hits.anti) == (1.0, 0.0)
    assert report.ok


def test_gold_answers_within_a_small_step_budget(helsinki_pack: Path) -> None:
    """With max_steps=6, three stations cannot all be checked (up to five calls each): gold answers at its last
    step with the stations found by then, and still hits."""
    report = run_selftest(
        SelftestOptions(benchmarks=["evgeoqa"], options={"evgeoqa": {"max_steps": 6}}, limit=13, modes=["native"]), []
    )
    (mode,) = report.benchmarks[0].modes
    assert not mode.shortfalls and {m.metric: m.gold for m in mode.metrics}["hits@1"] == 1.0
    bench = EVGeoQA(None, {"max_steps": 6})
    ep = next(e for e in bench.episodes() if len(e.ground_truth["query"]["answers"]) == 3)
    engine = ScriptedEngine()
    ctx = RunContext(sampling=Sampling(), tool_mode="native")
    engine.play(bench.gold(ep, ctx))
    res = asyncio.run(bench.run_episode(ep, engine, ctx, 0))
    assert res.scores["steps"] == 6 and res.tags["stop"] == "final" and res.scores["hits@1"] == 1.0


def test_gold_does_not_repeat_a_call_a_tool_refused(helsinki_pack: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool error (here every Cal_Distance has no route) is an answer too: gold tries each station's distance
    once and answers, instead of asking again until the budget runs out."""
    from rig.benchmarks.evgeoqa.world import NoRoute

    bench = EVGeoQA(None, {})
    ep = next(e for e in bench.episodes() if len(e.ground_truth["query"]["answers"]) == 3)

    def no_route(a: object, b: object) -> float:
        raise NoRoute("off the network")

    monkeypatch.setattr(bench.world(), "distance", no_route)
    engine = ScriptedEngine()
    ctx = RunContext(sampling=Sampling(), tool_mode="prompt")
    engine.play(bench.gold(ep, ctx))
    res = asyncio.run(bench.run_episode(ep, engine, ctx, 0))
    tried = [c for c in res.tool_calls if c.name == CAL_DISTANCE]
    assert len(tried) == 3 and all(c.error_category == "no_route" for c in tried)
    assert res.tags["stop"] == "final" and res.scores["hits@1"] == 1.0 and res.scores["steps"] < 20
