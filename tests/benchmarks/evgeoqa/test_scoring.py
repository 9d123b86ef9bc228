"""Hits@K matching and failure causes, on hand-computed cases (notes C5 and the README's matching rule)."""

from __future__ import annotations

import pytest

from rig.benchmarks.evgeoqa.data import AnswerStation, Station
from rig.benchmarks.evgeoqa.scoring import StationIndex, classify, hits, match, norm
from rig.maps.geo import offset

BASE = (30.44, 120.30)


def _station(i: int, name: str | None = None, north_m: float = 0.0) -> Station:
    lat, lon = offset(BASE[0], BASE[1], 1000.0 * i + north_m, 0.0)
    return Station(station_id=f"S{i}", name=name or f"Station {i}", lat=lat, lon=lon)


STATIONS = [_station(i) for i in range(1, 6)] + [
    _station(6, "Twin"),
    _station(7, "Twin"),  # a shared name names neither
    Station(station_id="X", name="Elsewhere", lat=31.0, lon=121.0),
    Station(
        station_id="Y",
        name="Near S2",
        lat=offset(*(_station(2).lat, _station(2).lon), 30.0, 0.0)[0],
        lon=_station(2).lon,
    ),  # 30 m from S2: the same site
    Station(
        station_id="Z",
        name="Across S2",
        lat=offset(*(_station(2).lat, _station(2).lon), 80.0, 0.0)[0],
        lon=_station(2).lon,
    ),  # 80 m: another site
    Station(station_id="Q", name="二期（长兴方向）", lat=31.5, lon=121.5),
]
INDEX = StationIndex(STATIONS)


def _answers(*ids: str, pois: dict[str, list[str]] | None = None) -> list[AnswerStation]:
    by = {s.station_id: s for s in STATIONS}
    return [
        AnswerStation(
            station_id=i,
            name=by[i].name,
            lat=by[i].lat,
            lon=by[i].lon,
            geodesic_m=0.0,
            poi_keys=(pois or {}).get(i, []),
        )
        for i in ids
    ]


GT = _answers("S1", "S2", "S3", "S4", "S5")


def test_worked_examples_from_the_notes() -> None:
    assert hits(["X", "S2", "nothing"], GT, INDEX) == {"hits@1": 0.0, "hits@2": 1.0, "hits@3": 1.0}
    assert hits(["S5", "X"], GT, INDEX) == {"hits@1": 1.0, "hits@2": 1.0, "hits@3": 1.0}
    assert hits([], GT, INDEX) == {"hits@1": 0.0, "hits@2": 0.0, "hits@3": 0.0}
    assert hits(None, GT, INDEX) == {"hits@1": 0.0, "hits@2": 0.0, "hits@3": 0.0}
    assert hits(["X", "X", "X", "S1"], GT, INDEX)["hits@3"] == 0.0  # only the first three count


def test_id_matching_is_case_and_space_insensitive() -> None:
    assert match("  s3 ", GT, INDEX) == 2
    assert match("Charging station S4 (the one by the park)", GT, INDEX) == 3  # one id as a token
    assert match("S1 or S2", GT, INDEX) is None  # two ids: ambiguous
    assert match("S11", GT, INDEX) is None
    assert match("", GT, INDEX) is None


def test_name_matching_needs_a_unique_name() -> None:
    assert match("station 2", GT, INDEX) == 1
    gt = _answers("S6")
    assert match("Twin", gt, INDEX) is None and match("S6", gt, INDEX) == 0
    gq = _answers("Q")
    assert match("二期(长兴方向)", gq, INDEX) == 0  # full- and half-width brackets are one
    assert norm("  Ａ（B）  c ") == "a(b) c"


def test_same_site_within_50_m() -> None:
    assert match("Y", GT, INDEX) == 1  # 30 m from S2
    assert match("Z", GT, INDEX) is None  # 80 m
    assert hits(["Z", "Y"], GT, INDEX) == {"hits@1": 0.0, "hits@2": 1.0, "hits@3": 1.0}


def _cls(**kw) -> str | None:  # type: ignore[no-untyped-def]
    base = dict(
        stop="final",
        hit=False,
        preds=["X"],
        index=INDEX,
        answers=_answers("S1", pois={"S1": ["cafe1"]}),
        seen_stations=["X"],
        seen_poi_keys=[],
        argument_errors=0,
    )
    base.update(kw)
    return classify(**base)


@pytest.mark.parametrize(
    "kw,cause",
    [
        ({"hit": True}, None),
        ({"stop": "format_errors", "preds": []}, "format_error"),
        ({"stop": "max_steps", "preds": [], "argument_errors": 3}, "max_tool_calls"),
        ({"seen_stations": []}, "hallucinated_station"),  # X was never returned by a search
        ({"preds": ["made-up"]}, "hallucinated_station"),
        ({"seen_stations": ["X", "S1"], "seen_poi_keys": ["cafe1"]}, "factual_conflation"),
        ({"seen_stations": ["X", "S1"], "seen_poi_keys": ["other"], "argument_errors": 1}, "argument_error"),
        ({"seen_stations": ["X", "S1"], "seen_poi_keys": ["other"]}, "insufficient_exploration"),
        ({"seen_poi_keys": ["cafe1"]}, "insufficient_exploration"),  # the POI seen, but never its station
    ],
)
def test_failure_causes(kw, cause) -> None:  # type: ignore[no-untyped-def]
    assert _cls(**kw) == cause
