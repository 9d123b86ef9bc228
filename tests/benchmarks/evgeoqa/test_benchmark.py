"""EVGeoQA end to end with scripted engines: the systematic explorer reaches every reachable answer, bad calls are
tool errors, budgets stop episodes, tables follow the paper's layouts, and the trajectory plot is self-contained."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import DataError, RunContext
from rig.benchmarks.evgeoqa.benchmark import EVGeoQA
from rig.benchmarks.evgeoqa.data import Query, Setting
from rig.benchmarks.evgeoqa.plot import road_segments, trajectory_svg
from rig.benchmarks.evgeoqa.tables import evgeoqa_tables
from rig.benchmarks.evgeoqa.tools import CHANGE_LOCATION, FINAL, SEARCH_POIS, SEARCH_STATIONS
from rig.records import EpisodeResult, Generation, Sampling
from tests.benchmarks.evgeoqa.explorer import ScriptedExplorer
from tests.fakes import FakeEngine


@pytest.fixture(scope="module")
def bench(helsinki_pack: Path) -> EVGeoQA:
    return EVGeoQA(options={"locations": "10"})


def _ctx(mode: str = "json") -> RunContext:
    return RunContext(sampling=Sampling(max_tokens=256), tool_mode=mode)


def _explorer(bench: EVGeoQA) -> ScriptedExplorer:
    ds = bench.dataset()
    return ScriptedExplorer({q.question: q.categories for q in ds.queries}, ds.setting, bench.world().extent)


def _run(bench: EVGeoQA, ep, answer, mode: str = "json") -> EpisodeResult:  # type: ignore[no-untyped-def]
    return asyncio.run(bench.run_episode(ep, FakeEngine(answer=answer), _ctx(mode), 0))


def test_registered() -> None:
    assert get_benchmark_class("evgeoqa") is EVGeoQA


def test_systematic_explorer_hits_every_reachable_query(bench: EVGeoQA) -> None:
    eps = bench.episodes()
    ex = _explorer(bench)
    reachable = [e for e in eps if e.tags["reachable"] == "true"]
    assert len(reachable) > 30
    for ep in reachable:
        r = _run(bench, ep, ex)
        assert r.scores["hits@1"] == 1.0, (ep.id, r.output["final"], r.error)
        assert r.scores["change_location"] == 0.0 and r.error_category is None
        assert r.tags["stop"] == "final" and r.tags["max_steps"] == "20"


def test_explorer_also_finds_far_answers_by_moving(bench: EVGeoQA) -> None:
    far = [e for e in bench.episodes() if e.tags["reachable"] == "false"]
    assert far
    ex = _explorer(bench)
    moved = 0
    for ep in far:
        r = _run(bench, ep, ex)
        assert r.scores["hits@1"] == 1.0, (ep.id, r.output["final"], r.tags["stop"])
        moved += r.scores["change_location"] > 0
        assert r.output["trace"]["moves"]
    assert moved == len(far)


@pytest.mark.parametrize("mode", ["prompt", "yaml", "native"])
def test_explorer_in_other_tool_modes(bench: EVGeoQA, mode: str) -> None:
    ep = next(e for e in bench.episodes() if e.tags["reachable"] == "true")
    r = _run(bench, ep, _explorer(bench), mode)
    assert r.scores["hits@1"] == 1.0 and r.tags["tool_mode"] == mode
    assert r.tags["mode_used"] == ("prompt" if mode == "native" else mode)  # the fake engine has no tool template


def _scripted(*replies: object):  # type: ignore[no-untyped-def]
    it = iter(replies)

    def answer(req) -> str:  # type: ignore[no-untyped-def]
        r = next(it)
        return r if isinstance(r, str) else json.dumps(r)

    return answer


def test_malformed_arguments_and_out_of_area_moves_are_tool_errors(bench: EVGeoQA) -> None:
    ep = next(e for e in bench.episodes() if e.tags["reachable"] == "false")
    q = Query.model_validate(ep.ground_truth["query"])
    replies = [
        {"name": SEARCH_STATIONS, "arguments": {"coord": [q.lat, q.lon]}},  # [lat, lon]: swapped
        {"name": CHANGE_LOCATION, "arguments": {"distance": "20 km", "direction": "N"}},  # off the map
        {"name": CHANGE_LOCATION, "arguments": {"distance": "a bit", "direction": "N"}},
        "I think I should look around first.",  # no call: a format error, re-prompted
        {"name": SEARCH_STATIONS, "arguments": {"coord": [q.lon, q.lat]}},
        {"name": FINAL, "arguments": {"stations": ["n0000"]}},
    ]
    r = _run(bench, ep, _scripted(*replies), mode="prompt")
    cats = [c.error_category for c in r.tool_calls]
    assert cats == ["invalid_arguments", "out_of_area", "invalid_arguments", None, None]
    assert "[lat, lon]" in r.tool_calls[0].error and "unchanged" in r.tool_calls[1].error
    assert r.scores["argument_errors"] == 2 and r.scores["out_of_area"] == 1 and r.scores["format_errors"] == 1
    assert r.scores["change_location"] == 2 and r.scores["hits@3"] == 0.0
    assert r.status == "scored" and r.error_category == "hallucinated_station"  # n0000 is no station
    assert r.output["trace"]["position"] == [q.lat, q.lon]
    assert r.output["answer"] == [{"text": "n0000", "station_id": None, "lat": None, "lon": None, "hit": False}]


def test_step_budget_and_format_budget(helsinki_pack: Path) -> None:
    b = EVGeoQA(options={"locations": "2", "max_steps": "3"})
    ep = b.episodes()[0]
    q = Query.model_validate(ep.ground_truth["query"])
    loop = {"name": SEARCH_STATIONS, "arguments": {"coord": [q.lon, q.lat]}}
    r = _run(b, ep, lambda req: json.dumps(loop))
    assert r.tags["stop"] == "max_steps" and r.scores["steps"] == 3 and r.error_category == "max_tool_calls"
    assert r.tags["max_steps"] == "3" and r.scores["hits@1"] == 0.0
    r = _run(b, ep, lambda req: "no idea", mode="prompt")
    assert r.tags["stop"] == "format_errors" and r.error_category == "format_error"
    assert r.scores["format_errors"] == 4  # three re-prompts, the fourth ends the episode


def test_insufficient_exploration_and_conflation(bench: EVGeoQA) -> None:
    ep = next(e for e in bench.episodes() if e.tags["reachable"] == "true")
    q = Query.model_validate(ep.ground_truth["query"])
    wrong = next(
        s.station_id for s in bench.dataset().stations if s.station_id not in {a.station_id for a in q.answers}
    )
    w = next(s for s in bench.dataset().stations if s.station_id == wrong)
    # sees every station but never checks the right one's POIs, then answers a wrong one
    r = _run(
        bench,
        ep,
        _scripted(
            {"name": SEARCH_STATIONS, "arguments": {"coord": [w.lon, w.lat]}},
            {"name": FINAL, "arguments": {"stations": [wrong]}},
        ),
    )
    assert r.scores["hits@1"] == 0.0
    a = q.answers[0]
    assert r.error_category == "insufficient_exploration"
    # checks the right station's POIs, then still answers the wrong one: the evidence was there
    r = _run(
        bench,
        ep,
        _scripted(
            {"name": SEARCH_STATIONS, "arguments": {"coord": [a.lon, a.lat]}},
            {"name": SEARCH_POIS, "arguments": {"coord": [a.lon, a.lat]}},
            {"name": SEARCH_STATIONS, "arguments": {"coord": [w.lon, w.lat]}},
            {"name": FINAL, "arguments": {"stations": [wrong, wrong]}},
        ),
    )
    assert r.scores["hits@3"] == 0.0 and r.error_category == "factual_conflation"


class _BrokenEngine(FakeEngine):
    async def chat(self, request):  # type: ignore[no-untyped-def]
        return Generation(request_hash=request.digest(), error="out of memory")


def test_engine_error_is_a_failed_episode(bench: EVGeoQA) -> None:
    ep = bench.episodes()[0]
    r = asyncio.run(bench.run_episode(ep, _BrokenEngine(answer=lambda req: ""), _ctx(), 0))
    assert r.status == "failed" and r.error_category == "engine_error" and r.error == "out of memory"
    assert r.scores["hits@1"] == 0.0
    err = evgeoqa_tables([r], "m")[2]
    assert err.rows[0][err.columns.index("engine_error")] == 1


@pytest.mark.parametrize(
    "opts,needle",
    [
        ({"max_steps": "zero"}, "max_steps"),
        ({"max_steps": "0"}, "below 1"),
        ({"phrasing": "haiku"}, "phrasing"),
        ({"intents": "coffee,karaoke"}, "karaoke"),
        ({"walk_radius_m": "-3"}, "positive"),
        ({"bogus": "1"}, "bogus"),
        ({"skip_trivial": "maybe"}, "skip_trivial"),
    ],
)
def test_bad_options(opts: dict, needle: str) -> None:
    with pytest.raises(DataError, match=needle):
        EVGeoQA(options=opts)


def test_missing_pack_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="pack"):
        EVGeoQA(options={"pack": str(tmp_path / "nowhere")}).episodes()


def test_episodes_record_radii_and_hash_follows_options(bench: EVGeoQA, helsinki_pack: Path) -> None:
    eps = bench.episodes()
    s = Setting.model_validate(eps[0].ground_truth["setting"])
    assert eps[0].tags["search_radius_m"] == f"{s.search_radius_m:g}" and eps[0].tags["tiers_m"] == "778,1556"
    assert "389 meters" in eps[0].tools[0].description
    assert len({e.prefix_group for e in eps}) == 1 and eps[0].messages[0].role == "system"
    assert bench.data_hash() == EVGeoQA(options={"locations": "10"}).data_hash()
    assert bench.data_hash() != EVGeoQA(options={"locations": "10", "seed": "1"}).data_hash()
    assert bench.data_hash() != EVGeoQA(options={"locations": "10", "walk_radius_m": "60"}).data_hash()


def _res(
    eid: str,
    tier: str,
    h: tuple[float, float, float],
    moves: float,
    cause: str | None = None,
    city: str = "Helsinki",
    repeat: int = 0,
    **scores: float,
) -> EpisodeResult:
    return EpisodeResult(
        benchmark="evgeoqa",
        episode_id=eid,
        repeat=repeat,
        error_category=cause,
        tags={
            "city": city,
            "tier": tier,
            "tiers_m": "778,1556",
            "reachable": "true",
            "search_radius_m": "389",
            "walk_radius_m": "78",
            "max_steps": "20",
        },
        scores={"hits@1": h[0], "hits@2": h[1], "hits@3": h[2], "change_location": moves, **scores},
    )


def test_tables_follow_the_paper_layouts() -> None:
    rs = [
        _res("a", "1", (1, 1, 1), 0),
        _res("b", "1", (0, 1, 1), 1),
        _res("c", "2", (0, 0, 0), 3, "insufficient_exploration", argument_errors=2),
        _res("d", "3", (0, 0, 1), 5),
    ]
    t2, t3, err, data = evgeoqa_tables(rs, "m")
    assert (
        t2.columns[2:5] == ["<778 m Hits@1", "<778 m Hits@2", "<778 m Hits@3"] and t2.columns[-1] == "No Limit Hits@3"
    )
    assert t2.rows == [["Helsinki", "m", 0.5, 1.0, 1.0, 1 / 3, 2 / 3, 2 / 3, 0.25, 0.5, 0.75]]
    assert t3.rows == [["Helsinki", "m", 0.5, 4 / 3, 2.25]]
    assert err.rows[0][:4] == ["Helsinki", "m", 4, 1]
    assert err.rows[0][4 + err.columns[4:].index("insufficient_exploration")] == 1
    assert err.rows[0][err.columns.index("Argument-error calls")] == 2
    assert data.rows == [["Helsinki", 2, 3, 4, 4, "389", "78", "20"]]
    # an empty tier is blank, never 0; several cities get an "All" row
    rs2 = [_res("x", "3", (1, 1, 1), 2, city="Espoo")]
    t2b = evgeoqa_tables(rs2, "m")[0]
    assert t2b.rows[0][2:8] == [None] * 6 and t2b.rows[0][8] == 1.0
    assert [r[0] for r in evgeoqa_tables(rs + rs2, "m")[0].rows] == ["Espoo", "Helsinki", "All"]
    assert evgeoqa_tables([], "m") == []


def test_trajectory_plot_is_self_contained(bench: EVGeoQA) -> None:
    ep = next(e for e in bench.episodes() if e.tags["reachable"] == "false")
    r = _run(bench, ep, _explorer(bench))
    q = Query.model_validate(ep.ground_truth["query"])
    svg = trajectory_svg(r, q, bench.dataset().setting, road_segments(bench.world().pack))
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    assert "<script" not in svg and "href" not in svg and "http" not in svg.replace("http://www.w3.org/2000/svg", "")
    moves = [e for e in root.iter(f"{ns}line") if e.get("marker-end")]
    assert len(moves) == len(r.output["trace"]["moves"]) > 0
    assert len(root.findall(f".//{ns}polygon")) == 1  # the user
    texts = [e.text for e in root.iter(f"{ns}text")]
    assert "A1" in texts and "GT1" in texts and any("Hits@1 1.0" in (t or "") for t in texts)
    searches = [e for e in root.iter(f"{ns}circle") if e.get("stroke-dasharray") == "5,4"]
    assert len(searches) == sum(1 for s in r.output["trace"]["searches"] if s["tool"] == SEARCH_STATIONS)


def test_data_that_holds_no_upstream_files_is_an_error(tmp_path: Path) -> None:
    """An explicit --data is upstream data: a wrong folder must not quietly fall back to generated queries."""
    with pytest.raises(DataError, match=r"no upstream QA file there"):
        EVGeoQA(tmp_path).episodes()
    assert EVGeoQA().data == EVGeoQA.default_data() and not EVGeoQA().data.is_absolute()
