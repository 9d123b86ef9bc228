from __future__ import annotations

import json
import sqlite3

import pytest

from rig.maps.geo import haversine_m
from rig.maps.pack_format import read_info


def test_pack_files_and_info(pack_dir, helsinki_pbf) -> None:
    info = read_info(pack_dir)
    assert info.source_file == "Helsinki.osm.pbf" and len(info.source_sha256) == 64
    assert info.city == "Helsinki"
    assert info.extent.contains(60.17, 24.94)
    c = info.counts
    assert c["pois"] > 1000 and c["streets"] > 50 and c["areas"] > 200 and c["charging_stations"] >= 1
    assert c["walk_edges"] > c["drive_edges"] > 0 and c["oneway_drive_ways"] > 0
    assert str(helsinki_pbf.parent) not in (pack_dir / "pack.json").read_text()  # no machine paths in the pack
    con = sqlite3.connect(pack_dir / "gazetteer.sqlite")
    kinds = dict(con.execute("SELECT kind, COUNT(*) FROM places GROUP BY kind").fetchall())
    assert set(kinds) == {"poi", "street", "area", "address"}
    hours = con.execute("SELECT COUNT(*) FROM places WHERE opening_hours IS NOT NULL").fetchone()[0]
    assert hours > 0


@pytest.mark.parametrize(
    "name, category",
    [
        ("Ateneum", "museum"),
        ("Stockmann", "department_store"),
        ("Cafe Ekberg", "cafe"),
        ("Suomen Kansallisteatteri", "theatre"),
        ("Hilton Helsinki Strand", "hotel"),
    ],
)
def test_geocode_exact_names(pack, name, category) -> None:
    top = pack.geocode(name)[0]
    assert top.name == name and top.category == category and top.match == "exact" and top.score == 100
    assert pack.info.extent.contains(top.lat, top.lon)


def test_geocode_street_and_normalisation(pack) -> None:
    top = pack.geocode("  MANNERHEIMINTIE ")[0]
    assert top.kind == "street" and top.name == "Mannerheimintie" and top.address == "Mannerheimintie, Helsinki"


def test_geocode_fuzzy(pack) -> None:
    res = pack.geocode("Ateneumm")
    assert res[0].name == "Ateneum" and res[0].match == "fuzzy" and 80 <= res[0].score < 100
    assert pack.geocode("Kansallisteatteri")[0].name == "Suomen Kansallisteatteri"
    assert pack.geocode("qqqqzzzz xxyy") == []


def test_geocode_city_and_limit(pack) -> None:
    assert pack.geocode("Ateneum", city="helsinki")[0].name == "Ateneum"
    assert pack.geocode("Ateneum", city="Tampere") == []
    assert len(pack.geocode("Mannerheimintie", limit=3)) == 3


def test_reverse_geocode(pack) -> None:
    at = pack.geocode("Cafe Ekberg")[0]
    r = pack.reverse_geocode(at.lat, at.lon)
    assert r.nearest is not None and r.distance_m is not None and r.distance_m < 30
    assert r.address and "Helsinki" in r.address
    assert r.street is not None
    far = pack.reverse_geocode(0.0, 0.0)
    assert far.nearest is None and far.street is None


def test_nearby_within_radius_nearest_first(pack) -> None:
    lat, lon = 60.1699, 24.9384
    res = pack.nearby(lat, lon, 300)
    assert res, "central Helsinki has POIs within 300 m"
    d = [r.distance_m for r in res]
    assert d == sorted(d) and max(d) <= 300
    assert all(haversine_m(lat, lon, r.lat, r.lon) <= 300.01 for r in res)
    cafes = pack.nearby(lat, lon, 500, category="cafe", limit=50)
    assert cafes and all(r.category == "cafe" for r in cafes)
    assert {r.place_id for r in pack.nearby(lat, lon, 500, category="amenity=cafe", limit=50)} == {
        r.place_id for r in cafes
    }
    kw = pack.nearby(lat, lon, 1000, keyword="ekberg")
    assert [r.name for r in kw] == ["Cafe Ekberg"]
    assert pack.nearby(lat, lon, 1) == [] or all(r.distance_m <= 1 for r in pack.nearby(lat, lon, 1))


def test_stations_and_areas(pack) -> None:
    st = pack.stations(60.17, 24.94, 5000)
    assert st and all(s.category == "charging_station" for s in st)
    assert [s.distance_m for s in st] == sorted(s.distance_m for s in st)
    areas = pack.areas_at(60.1725, 24.9460)
    assert areas and areas[0].category_key == "landuse"


def test_distance_kinds(pack) -> None:
    a, b = (60.1700, 24.9440), (60.1650, 24.9400)
    gc = pack.distance(a, b).distance_m
    geo = pack.distance(a, b, "geodesic").distance_m
    net = pack.distance(a, b, "network", "walk")
    assert abs(gc - geo) / gc < 0.005
    assert net.distance_m >= gc and net.duration_s > 0
    with pytest.raises(ValueError):
        pack.distance(a, b, "manhattan")


def test_place_extra_is_json(pack_dir) -> None:
    con = sqlite3.connect(pack_dir / "gazetteer.sqlite")
    for (extra,) in con.execute("SELECT extra FROM places LIMIT 50"):
        assert isinstance(json.loads(extra), dict)
