"""GeoRover tools: answers over the Helsinki pack, [lon, lat] order, moves, and every bad call as a tool error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rig.agents.toolmode import envelope_schema
from rig.benchmarks.evgeoqa.data import NOISE_CATEGORIES, Setting, Station, poi_categories
from rig.benchmarks.evgeoqa.generator import setting_for
from rig.benchmarks.evgeoqa.tools import (
    CAL_DISTANCE,
    CHANGE_LOCATION,
    FINAL,
    SEARCH_POIS,
    SEARCH_STATIONS,
    GeoRoverExecutor,
    tool_specs,
)
from rig.benchmarks.evgeoqa.world import PackWorld, PoiHit, UpstreamWorld
from rig.decoding.gbnf import json_schema_to_gbnf
from rig.decoding.validate import validate
from rig.decoding.yaml_gbnf import yaml_schema_to_gbnf
from rig.maps.records import Extent


@pytest.fixture(scope="module")
def world(helsinki_pack: Path) -> PackWorld:
    from rig.maps.query import MapPack

    pack = MapPack(helsinki_pack)
    return PackWorld(pack, setting_for(pack))


def linyi_world() -> UpstreamWorld:
    """A one-station upstream world around the notes' ChangeLocation example (Linyi, [118.292622, 35.189944])."""
    st = Station(station_id="S1", name="Station one", lat=35.189944, lon=118.292622)
    pois = [PoiHit(key="Noodle house", name="Noodle house", type="餐饮服务;中餐厅;中餐厅", address="", distance_m=120)]
    ext = Extent(min_lat=35.0, min_lon=118.0, max_lat=35.4, max_lon=118.6)
    return UpstreamWorld([st], [pois], Setting.paper(), "Linyi", ext)


def test_change_location_matches_the_worked_example() -> None:
    ex = GeoRoverExecutor(linyi_world(), 35.189944, 118.292622)
    north = ex(CHANGE_LOCATION, {"start_location": [118.292622, 35.189944], "distance": "500", "direction": "N"})
    assert north.ok and north.data == {"new_location": [118.292622, 35.194441]}
    east = ex(CHANGE_LOCATION, {"start_location": [118.292622, 35.189944], "distance": 500, "direction": "E"})
    assert east.ok and east.data == {"new_location": [118.298124, 35.189944]}
    # without start_location the move starts where the agent stands (the last successful move)
    again = ex(CHANGE_LOCATION, {"distance": "0.5 km", "direction": "west"})
    assert again.data == {"new_location": [118.292622, 35.189944]}
    assert ex.position == pytest.approx((35.189944, 118.292622), abs=1e-6)
    assert len(ex.moves) == 3 and all(m["ok"] for m in ex.moves)


def test_upstream_world_tools() -> None:
    ex = GeoRoverExecutor(linyi_world(), 35.19, 118.29)
    r = ex(SEARCH_STATIONS, {"coord": [118.29, 35.19]})
    assert r.ok and [s["station_id"] for s in r.data] == ["S1"] and r.data[0]["coord"] == "118.292622,35.189944"
    assert ex(SEARCH_STATIONS, {"coord": [118.29, 35.25]}).data == []  # 6.7 km away: beyond 5 km
    near = ex(SEARCH_POIS, {"coord": "118.292622,35.189944"})  # the string Search_Stations returns is accepted
    assert [p["poi_name"] for p in near.data] == ["Noodle house"] and near.data[0]["poi_distance"] == "120 meters"
    assert ex(SEARCH_POIS, {"coord": [118.2934, 35.1899]}).data == []  # 71 m from the station: nothing known
    d = ex(CAL_DISTANCE, {"coord1": [120.37401098079212, 30.573871636176943], "coord2": [120.304083, 30.440093]})
    assert not d.ok and d.error_category == "out_of_area"  # Hangzhou is not in this world
    d = ex(CAL_DISTANCE, {"coord1": [118.29, 35.19], "coord2": [118.30, 35.20]})
    assert d.ok and d.data["distance"].endswith(" meters")
    assert ex.seen_stations.keys() == {"S1"} and ex.seen_poi_keys == {"Noodle house"}


def test_search_stations_over_the_pack(world: PackWorld) -> None:
    s = world.stations[0]
    ex = GeoRoverExecutor(world, s.lat, s.lon)
    r = ex(SEARCH_STATIONS, {"coord": [s.lon, s.lat]})
    assert r.ok and r.data[0]["station_id"] == s.station_id and r.data[0]["station_distance"] == "0 meters"
    assert r.data[0]["coord"] == f"{s.lon:.6f},{s.lat:.6f}"
    dists = [int(x["station_distance"].split()[0]) for x in r.data]
    assert dists == sorted(dists) and max(dists) <= world.setting.search_radius_m
    assert s.station_id in ex.seen_stations


def test_search_pois_over_the_pack(world: PackWorld) -> None:
    s = world.stations[0]
    ex = GeoRoverExecutor(world, s.lat, s.lon)
    r = ex(SEARCH_POIS, {"coord": [s.lon, s.lat]})
    assert r.ok and 0 < len(r.data) <= world.setting.poi_cap
    for p in r.data:
        key, value = p["type"].split(";", 1)
        assert not poi_categories(key, value) <= NOISE_CATEGORIES
        assert int(p["poi_distance"].split()[0]) <= world.setting.walk_radius_m
    assert len(ex.seen_poi_keys) == len(r.data)


def test_cal_distance_is_the_driving_distance(world: PackWorld) -> None:
    a, b = world.stations[0], world.stations[1]
    ex = GeoRoverExecutor(world, a.lat, a.lon)
    r = ex(CAL_DISTANCE, {"coord1": [a.lon, a.lat], "coord2": [b.lon, b.lat]})
    want = world.pack.distance((a.lat, a.lon), (b.lat, b.lon), kind="network", mode="drive").distance_m
    assert r.ok and r.data == {"distance": f"{round(want)} meters"}


@pytest.mark.parametrize(
    "name,args,category,needle",
    [
        (SEARCH_STATIONS, {"coord": [60.17, 24.94]}, "invalid_arguments", "[lat, lon]"),  # swapped
        (SEARCH_STATIONS, {"coord": [200, 60.17]}, "invalid_arguments", "outside the valid range"),
        (SEARCH_STATIONS, {"coord": [24.90, 60.17]}, "out_of_area", "outside the map area"),
        (SEARCH_STATIONS, {"coord": [24.94]}, "invalid_arguments", "two numbers"),
        (SEARCH_STATIONS, {"coord": ["a", "b"]}, "invalid_arguments", "two numbers"),
        (SEARCH_STATIONS, {"coord": "here"}, "invalid_arguments", "not [lon, lat]"),
        (SEARCH_STATIONS, {"coord": [True, 60.17]}, "invalid_arguments", "two numbers"),
        (SEARCH_STATIONS, {}, "invalid_arguments", "missing argument"),
        (SEARCH_STATIONS, {"coord": [24.94, 60.17], "radius": 9}, "invalid_arguments", "unknown argument"),
        (SEARCH_POIS, {"location": [24.94, 60.17]}, "invalid_arguments", "unknown argument"),
        (CHANGE_LOCATION, {"distance": "far", "direction": "N"}, "invalid_arguments", "distance"),
        (CHANGE_LOCATION, {"distance": -5, "direction": "N"}, "invalid_arguments", "more than 0"),
        (CHANGE_LOCATION, {"distance": True, "direction": "N"}, "invalid_arguments", "distance"),
        (CHANGE_LOCATION, {"distance": 100, "direction": "up"}, "invalid_arguments", "N, E, S, W"),
        (CHANGE_LOCATION, {"distance": 100}, "invalid_arguments", "missing"),
        (
            CHANGE_LOCATION,
            {"start_location": None, "distance": 100, "direction": "N"},
            "invalid_arguments",
            "start_location: expected [lon, lat]",
        ),  # an explicit null is not a left-out argument
        ("Final_Answer", {"stations": ["s1"]}, "unknown_tool", "unknown tool"),  # the loop ends on it; never executed
        (CHANGE_LOCATION, {"distance": 50_000, "direction": "N"}, "out_of_area", "leaves the map"),
        (CAL_DISTANCE, {"coord1": [24.94, 60.17]}, "invalid_arguments", "missing"),
        ("Search_Everything", {}, "unknown_tool", "unknown tool"),
        (SEARCH_STATIONS, ["not", "an", "object"], "invalid_arguments", "JSON object"),
    ],
)
def test_bad_calls_are_tool_errors(world: PackWorld, name: str, args, category: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    ex = GeoRoverExecutor(world, 60.17, 24.945)
    r = ex(name, args)
    assert not r.ok and r.error_category == category and needle in r.error, r.error
    assert ex.position == (60.17, 24.945)  # nothing moved
    assert ex.errors[category] == 1


def test_refused_move_keeps_the_position_and_is_recorded(world: PackWorld) -> None:
    ex = GeoRoverExecutor(world, 60.17, 24.945)
    ok = ex(CHANGE_LOCATION, {"distance": 100, "direction": "S"})
    assert ok.ok
    bad = ex(CHANGE_LOCATION, {"distance": 5000, "direction": "E"})
    assert bad.error_category == "out_of_area" and "unchanged" in bad.error
    assert ex.position == pytest.approx(tuple(reversed(ok.data["new_location"])))
    assert [m["ok"] for m in ex.moves] == [True, False]
    t = ex.trace()
    json.dumps(t)  # the trace goes into EpisodeResult.output
    assert t["calls"] == {CHANGE_LOCATION: 2} and t["errors"] == {"out_of_area": 1}


def test_tool_schemas_serve_every_tool_mode() -> None:
    specs = tool_specs(Setting.scaled(1944.6))
    assert [t.name for t in specs] == [SEARCH_STATIONS, SEARCH_POIS, CHANGE_LOCATION, CAL_DISTANCE, FINAL]
    assert "389 meters" in specs[0].description and "78 meters" in specs[1].description
    env = envelope_schema(specs)
    assert json_schema_to_gbnf(env) and yaml_schema_to_gbnf(env)
    final = specs[-1].parameters
    assert validate({"stations": ["a", "b", "c"]}, final) == []
    assert validate({"stations": []}, final) and validate({"stations": ["a", "b", "c", "d"]}, final)
    move = specs[2].parameters
    assert validate({"distance": "500", "direction": "N"}, move) == []
    assert validate({"distance": 500, "direction": "N", "start_location": [1, 2]}, move) == []
