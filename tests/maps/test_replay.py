from __future__ import annotations

import sqlite3

import pytest

from rig.maps.replay import CanonicalError, CoordField, KeySpec, ReplayPolicy, ReplayStore, canonical_time, canonicalise

FUZZY = ReplayPolicy(fuzzy_names=True, fuzzy_threshold=85, nearest=True, max_distance_m=50)


@pytest.fixture()
def store(tmp_path):
    s = ReplayStore(tmp_path / "replay.sqlite")
    s.register("amap", "query_poi", KeySpec(names=["keywords", "city"], fuzzy_field="keywords"))
    s.register(
        "amap",
        "walking_route",
        KeySpec(coords=[CoordField(name="origin", order="lon,lat"), CoordField(name="destination", order="lon,lat")]),
    )
    s.register("amap", "reverse_geocoding", KeySpec(coords=[CoordField(name="latitude", lon_arg="longitude")]))
    s.register("rig", "traffic", KeySpec(names=["road"], times=["at"]))
    yield s
    s.close()


def test_exact_hit_with_canonical_names(store) -> None:
    store.put("amap", "query_poi", {"keywords": "Cafe  Ekberg", "city": "Helsinki"}, {"name": "Cafe Ekberg"})
    a = store.get("amap", "query_poi", {"keywords": " CAFE ekberg ", "city": "helsinki"})
    assert a.label == "hit" and a.response == {"name": "Cafe Ekberg"} and a.similarity is None


def test_exact_hit_with_rounded_coordinates_and_declared_order(store) -> None:
    store.put(
        "amap", "walking_route", {"origin": "24.9412341,60.1700001", "destination": "24.95,60.168"}, {"status": "1"}
    )
    a = store.get("amap", "walking_route", {"origin": " 24.94123406 , 60.17", "destination": [24.95, 60.168]})
    assert a.label == "hit"
    # The key is written lat first whatever the provider's order.
    assert '"origin":"60.170000,24.941234"' in a.key


def test_fuzzy_name_hit_and_miss(store) -> None:
    store.put("amap", "query_poi", {"keywords": "Suomen Kansallisteatteri", "city": "Helsinki"}, {"id": 1})
    a = store.get("amap", "query_poi", {"keywords": "Suomen Kansalisteatteri", "city": "Helsinki"}, FUZZY)
    assert a.label == "fuzzy" and a.fallback == "name" and a.response == {"id": 1} and a.similarity >= 85
    # Other arguments must match exactly: another city is a miss.
    assert (
        store.get("amap", "query_poi", {"keywords": "Suomen Kansalisteatteri", "city": "Espoo"}, FUZZY).label == "miss"
    )
    # Strict policy (the default) never falls back.
    assert store.get("amap", "query_poi", {"keywords": "Suomen Kansalisteatteri", "city": "Helsinki"}).label == "miss"
    assert store.get("amap", "query_poi", {"keywords": "Ateneum", "city": "Helsinki"}, FUZZY).label == "miss"


def test_nearest_coordinate_hit_within_bound(store) -> None:
    store.put("amap", "reverse_geocoding", {"latitude": "60.170000", "longitude": "24.941000"}, {"address": "A"})
    store.put("amap", "reverse_geocoding", {"latitude": 60.171, "longitude": 24.941}, {"address": "B"})
    a = store.get("amap", "reverse_geocoding", {"latitude": 60.17015, "longitude": 24.9411}, FUZZY)
    assert a.label == "fuzzy" and a.fallback == "nearest" and a.response == {"address": "A"}
    assert 0 < a.distance_m < 25
    far = store.get("amap", "reverse_geocoding", {"latitude": 60.1750, "longitude": 24.941}, FUZZY)
    assert far.label == "miss"


def test_nearest_needs_every_coordinate_within_bound(store) -> None:
    store.put("amap", "walking_route", {"origin": "24.941,60.170", "destination": "24.950,60.168"}, {"r": 1})
    near = store.get("amap", "walking_route", {"origin": "24.9412,60.1701", "destination": "24.9501,60.1680"}, FUZZY)
    assert near.label == "fuzzy" and near.distance_m <= 50
    moved = store.get("amap", "walking_route", {"origin": "24.9412,60.1701", "destination": "24.9600,60.1680"}, FUZZY)
    assert moved.label == "miss"


def test_miss_counter_and_counts(store) -> None:
    store.put("amap", "query_poi", {"keywords": "Ateneum"}, {"id": 2})
    for _ in range(3):
        store.get("amap", "query_poi", {"keywords": "nowhere"})
    store.get("amap", "query_poi", {"keywords": "ateneum"})
    assert store.misses == 3 and store.counts["hit"] == 1


def test_times_are_canonical_utc(store) -> None:
    assert canonical_time("2026-03-04T10:00:00+02:00") == "2026-03-04T08:00:00Z"
    assert canonical_time("2026-03-04 08:00:00") == "2026-03-04T08:00:00Z"
    assert canonical_time(0) == "1970-01-01T00:00:00Z"
    store.put("rig", "traffic", {"road": "Mannerheimintie", "at": "2026-03-04T10:00:00+02:00"}, {"jam": 2})
    assert store.get("rig", "traffic", {"road": "mannerheimintie", "at": "2026-03-04T08:00:00Z"}).label == "hit"
    with pytest.raises(CanonicalError):
        canonicalise({"at": "yesterday"}, KeySpec(times=["at"]))


def test_bad_coordinates_refused(store) -> None:
    with pytest.raises(CanonicalError):
        store.get("amap", "walking_route", {"origin": "60.17,24.94,1", "destination": "24.95,60.168"})
    with pytest.raises(CanonicalError):
        store.get("amap", "walking_route", {"origin": "24.94,95.0", "destination": "24.95,60.168"})


def test_content_hash_and_persistence(tmp_path, store) -> None:
    h0 = store.content_hash()
    store.put("amap", "query_poi", {"keywords": "Ateneum"}, {"id": 2})
    h1 = store.content_hash()
    assert h1 != h0
    store.put("amap", "query_poi", {"keywords": "ATENEUM"}, {"id": 2})  # same key, same response
    assert store.content_hash() == h1 and len(store) == 1
    store.close()
    again = ReplayStore(tmp_path / "replay.sqlite")
    assert again.content_hash() == h1
    assert again.get("amap", "query_poi", {"keywords": "ateneum"}).label == "hit"
    assert again.spec("amap", "query_poi").fuzzy_field == "keywords"
    again.close()


def test_spec_cannot_change_under_entries(store) -> None:
    store.put("amap", "query_poi", {"keywords": "Ateneum"}, {"id": 2})
    with pytest.raises(ValueError):
        store.register("amap", "query_poi", KeySpec(names=["keywords"]))


def test_injection_strings_are_just_data(store, tmp_path) -> None:
    evil = "'; DROP TABLE entries;--"
    store.put("amap", "query_poi", {"keywords": evil}, {"id": 3})
    assert store.get("amap", "query_poi", {"keywords": evil}).label == "hit"
    tables = {
        r[0]
        for r in sqlite3.connect(tmp_path / "replay.sqlite").execute(
            "SELECT name FROM sqlite_master WHERE type='table'"
        )
    }
    assert "entries" in tables


def test_fuzzy_index_sees_new_entries(store) -> None:
    store.put("amap", "query_poi", {"keywords": "Kansallismuseo"}, {"id": 1})
    assert store.get("amap", "query_poi", {"keywords": "Ateneumm"}, FUZZY).label == "miss"  # builds the index
    store.put("amap", "query_poi", {"keywords": "Ateneum"}, {"id": 2})
    assert store.get("amap", "query_poi", {"keywords": "Ateneumm"}, FUZZY).label == "fuzzy"
