from __future__ import annotations

import pytest

from rig.maps import dialects as d
from rig.maps.geo import decode_polyline


@pytest.fixture(scope="module")
def route(pack):
    return pack.route([(60.1700, 24.9440), (60.1680, 24.9420), (60.1650, 24.9400)], "drive")


def test_google_directions_shape(route) -> None:
    g = d.google_directions(route)
    assert g["status"] == "OK"
    r = g["routes"][0]
    assert len(r["legs"]) == 2
    assert sum(leg["distance"]["value"] for leg in r["legs"]) == pytest.approx(route.distance_m, abs=2)
    step = r["legs"][0]["steps"][0]
    assert {
        "distance",
        "duration",
        "start_location",
        "end_location",
        "html_instructions",
        "polyline",
        "travel_mode",
    } <= set(step)
    assert step["travel_mode"] == "DRIVING" and set(step["start_location"]) == {"lat", "lng"}
    pts = decode_polyline(r["overview_polyline"]["points"])
    assert pts[0] == pytest.approx((60.17, 24.944), abs=1e-5)
    assert r["bounds"]["northeast"]["lat"] >= r["bounds"]["southwest"]["lat"]


def test_google_geocode_and_nearby(pack) -> None:
    g = d.google_geocode(pack.geocode("Ateneum", limit=1))
    assert g["status"] == "OK" and g["results"][0]["geometry"]["location"]["lng"] == pytest.approx(24.944, abs=1e-3)
    assert d.google_geocode([])["status"] == "ZERO_RESULTS"
    n = d.google_nearby(pack.nearby(60.17, 24.94, 200))
    assert n["status"] == "OK" and "vicinity" in n["results"][0]
    assert d.google_error("bad", "invalid_arguments")["status"] == "INVALID_REQUEST"
    assert d.google_reverse_geocode(pack.reverse_geocode(60.17, 24.94))["results"]


def test_amap_direction_shape(route) -> None:
    a = d.amap_direction(route)
    assert (a["status"], a["info"], a["infocode"]) == ("1", "OK", "10000")
    path = a["route"]["paths"][0]
    assert path["distance"] == str(round(route.distance_m)) and isinstance(path["cost"]["duration"], str)
    lon, lat = map(float, a["route"]["origin"].split(","))
    assert (lat, lon) == (60.17, 24.944)  # AMap writes lon,lat
    step = path["steps"][0]
    assert {"instruction", "orientation", "road_name", "step_distance", "cost", "polyline"} <= set(step)
    first = step["polyline"].split(";")[0].split(",")
    assert float(first[0]) == pytest.approx(24.944) and float(first[1]) == pytest.approx(60.17)
    assert path["steps"][-1]["assistant_action"] == "到达目的地"


def test_amap_places_and_mobility_envelope(pack) -> None:
    t = d.amap_place_text(pack.geocode("Ateneum", limit=2))
    assert t["count"] == str(len(t["pois"])) and "," in t["pois"][0]["location"]
    around = d.amap_place_around(pack.nearby(60.17, 24.94, 300, limit=5))
    assert all(p["distance"].isdigit() for p in around["pois"])
    env = d.mobility_query_poi(pack.geocode("Ateneum"))
    assert env["status"] == 0 and env["error"] is None and set(env["data"]) == {"location", "name", "address"}
    assert d.mobility_query_poi([])["status"] == 1
    assert d.mobility_search_around(pack.nearby(60.17, 24.94, 300))["status"] == 0
    assert d.mobility_reverse_geocoding(pack.reverse_geocode(60.17, 24.94))["data"]["address"]
    assert d.amap_regeo(pack.reverse_geocode(60.17, 24.94))["regeocode"]["formatted_address"]
    assert d.amap_error("INVALID_PARAMS")["status"] == "0"


def test_georover_records(pack) -> None:
    st = d.georover_stations(pack.stations(60.17, 24.94), 60.17, 24.94)
    assert st and st[0]["station_distance"].endswith(" meters") and st[0]["type"] == "汽车服务;充电站;充电站"
    lon, lat = map(float, st[0]["coord"].split(","))
    assert 60 < lat < 61 and 24 < lon < 25
    pois = d.georover_pois(pack.nearby(60.17, 24.94, 1000, limit=50), 60.17, 24.94)
    assert len(pois) <= 20 and set(pois[0]) == {"address", "poi_distance", "poi_name", "tag", "type"}
    assert d.georover_distance(1234.4) == {"distance": "1234 meters"}
    assert d.georover_move(35.189944, 118.292622, 500, "E") == {"new_location": [118.298124, 35.189944]}


def test_plain(pack) -> None:
    out = d.plain(pack.geocode("Ateneum", limit=1))
    assert out[0]["name"] == "Ateneum" and isinstance(out[0], dict)
