"""Upstream EVGeoQA files: both key spellings, [lat, lon] in the data and [lon, lat] in the tools, bad input named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rig.benchmarks.base import DataError, RunContext
from rig.benchmarks.evgeoqa.benchmark import EVGeoQA
from rig.benchmarks.evgeoqa.importer import ImportError_, load_upstream
from rig.benchmarks.evgeoqa.tools import SEARCH_POIS, SEARCH_STATIONS, GeoRoverExecutor
from rig.records import Sampling
from tests.fakes import FakeEngine

USER = [30.573871636176943, 120.37401098079212]  # [lat, lon], the README example


def _answer(sid: str, coord: list[float], dist: float, poi: str, spelling: str = "Station_cord") -> dict:
    return {
        "Station_id": sid,
        "Station_name": f"站 {sid}",
        spelling: coord,
        "Distance": dist,
        "Station_poi_type": "餐饮服务;中餐厅;中餐厅",
        "Station_poi_name": poi,
        "correlation_measure": 0.91,
    }


def write_upstream(d: Path, qa: list[dict] | None = None, stations: list[dict] | None = None) -> Path:
    qa = (
        qa
        if qa is not None
        else [
            {
                "Question_id": 11,
                "Question": "我想吃饭顺便充电",
                "Question_location": "某路",
                "Question_location_cord": USER,
                "Question_type": "advance",
                "Question_poi": "中餐厅;中餐厅 ",
                "Answer": [
                    _answer("A1", [30.440093, 120.304083], 16.27918236, "面馆"),
                    _answer("A9", [30.45, 120.31], 15.5, "饭店"),
                ],
            },
            {
                "Question_id": 12,
                "Question": "充电并喝咖啡",
                "Question_location": "另一路",
                "Question_location_coord": [30.441, 120.305],
                "Question_type": "advance",
                "Question_poi": "咖啡厅;咖啡厅",
                "Answer": [_answer("A1", [30.440093, 120.304083], 0.13, "面馆", "Station_coord")],
            },
        ]
    )
    stations = (
        stations
        if stations is not None
        else [
            {
                "station_name": "站 A1",
                "station_id": "A1",
                "address": "某路1号",
                "location": "120.304083,30.440093",
                "pois": [
                    {
                        "name": "面馆",
                        "type": "餐饮服务;中餐厅;中餐厅",
                        "address": "",
                        "distance": "120",
                        "location_id": "B1",
                    }
                ],
                "error": None,
            },
            {
                "station_name": "站 A2",
                "station_id": "A2",
                "address": "",
                "location": None,
                "pois": [],
                "error": "Failed to find coordinates for the location.",
            },
        ]
    )
    d.mkdir(parents=True, exist_ok=True)
    (d / "QA_Pairs.json").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in qa) + "\n", encoding="utf-8")
    (d / "Stations.json").write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in stations) + "\n", encoding="utf-8"
    )
    return d


def test_import_converts_coordinates_and_keeps_answers(tmp_path: Path) -> None:
    ds, world = load_upstream(write_upstream(tmp_path), city="Hangzhou")
    q1, q2 = ds.queries
    assert (q1.lat, q1.lon) == tuple(USER) and q1.intent == "中餐厅;中餐厅" and q1.source == "upstream"
    assert [a.station_id for a in q1.answers] == ["A1", "A9"]
    a = q1.answers[0]
    assert (a.lat, a.lon) == (30.440093, 120.304083)
    assert a.geodesic_m == pytest.approx(16279.18, abs=0.1)  # the data's Distance is geodesic (notes C5)
    assert a.drive_m == pytest.approx(16279.18236) and a.poi_keys == ["面馆"]
    assert q1.tier_distance_m == a.geodesic_m and ds.setting.tier(q1.tier_distance_m) == 2 and not q1.reachable
    assert q2.reachable and ds.setting.tier(q2.tier_distance_m) == 1
    ids = [s.station_id for s in ds.stations]
    assert ids == ["A1", "A9"]  # A2 has no location; A9 only appears in an answer
    assert any("without a location" in n for n in ds.notes) and any("added" in n for n in ds.notes)
    assert world.extent.contains(*USER) and world.setting.search_radius_m == 5000


def test_upstream_tools_take_lon_lat(tmp_path: Path) -> None:
    _, world = load_upstream(write_upstream(tmp_path))
    ex = GeoRoverExecutor(world, 30.441, 120.305)
    r = ex(SEARCH_STATIONS, {"coord": [120.305, 30.441]})
    assert [s["station_id"] for s in r.data][:1] == ["A1"] and r.data[0]["coord"] == "120.304083,30.440093"
    swapped = ex(SEARCH_STATIONS, {"coord": [30.441, 120.305]})
    assert not swapped.ok and "[lat, lon]" in swapped.error
    pois = ex(SEARCH_POIS, {"coord": [120.304083, 30.440093]})
    assert [p["poi_name"] for p in pois.data] == ["面馆"]


@pytest.mark.parametrize(
    "qa,needle",
    [
        (
            [{"Question_id": 1, "Question": "q", "Question_location_coord": [120.37, 30.57], "Answer": []}],
            "looks like [lon, lat]",
        ),
        (
            [{"Question_id": 1, "Question": "q", "Answer": [_answer("A1", [30.4, 120.3], 1, "x")]}],
            "Question_location_coord / Question_location_cord",
        ),
        ([{"Question_id": 1, "Question": "q", "Question_location_coord": USER, "Answer": []}], "non-empty list"),
        (
            [
                {
                    "Question_id": 1,
                    "Question": "q",
                    "Question_location_coord": USER,
                    "Answer": [{"Station_id": "A1", "Station_name": "n", "Distance": 1}],
                }
            ],
            "Answer[0]: missing field Station_coord",
        ),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path: Path, qa: list[dict], needle: str) -> None:
    d = write_upstream(tmp_path, qa=qa)
    with pytest.raises(ImportError_) as exc:
        load_upstream(d)
    assert needle in str(exc.value) and "QA_Pairs.json:1" in str(exc.value)


def test_bad_files(tmp_path: Path) -> None:
    d = write_upstream(tmp_path / "a")
    (d / "QA_Pairs.json").write_text('{"Question_id": 1,\n', encoding="utf-8")
    with pytest.raises(ImportError_, match=r"QA_Pairs\.json:1: not valid JSON"):
        load_upstream(d)
    d = write_upstream(tmp_path / "b", stations=[{"station_id": "A1", "station_name": "n", "location": "x,y"}])
    with pytest.raises(ImportError_, match=r"Stations\.json:1: location"):
        load_upstream(d)
    d = write_upstream(tmp_path / "c")
    (d / "Stations.json").unlink()
    with pytest.raises(DataError, match="no station table"):
        EVGeoQA(d).episodes()


def test_benchmark_runs_upstream_data(tmp_path: Path) -> None:
    d = write_upstream(tmp_path)
    bench = EVGeoQA(d, {"city": "Hangzhou"})
    eps = bench.episodes()
    assert [e.id for e in eps] == ["11", "12"]
    assert eps[0].tags["tier"] == "2" and eps[0].tags["tiers_m"] == "10000,20000" and eps[0].tags["city"] == "Hangzhou"
    assert "[120.374011, 30.573872]" in eps[0].messages[-1].content  # the prompt gives [lon, lat]
    h = bench.data_hash()
    assert h == EVGeoQA(d, {"city": "Hangzhou"}).data_hash() and h != EVGeoQA(d, {"city": "Linyi"}).data_hash()
    script = iter(
        [
            {"name": SEARCH_STATIONS, "arguments": {"coord": [120.304083, 30.440093]}},
            {"name": "Final_Answer", "arguments": {"stations": ["A1"]}},
        ]
    )
    eng = FakeEngine(answer=lambda req: json.dumps(next(script)))
    r = asyncio.run(bench.run_episode(eps[0], eng, RunContext(sampling=Sampling(), tool_mode="json"), 0))
    assert r.scores["hits@1"] == 1.0 and r.error_category is None and r.output["final"] == ["A1"]
