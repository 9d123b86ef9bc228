"""EVGeoQA generator: radii scaling, determinism, location sampling, and ground truth checked by brute force."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rig.benchmarks.evgeoqa.data import INTENT_BY_ID, NOISE_CATEGORIES, NOISE_KEYS, Setting, poi_categories
from rig.benchmarks.evgeoqa.generator import GenerationError, generate, kmeans_1d, sample_locations, setting_for
from rig.maps.geo import geodesic_m, haversine_m


@pytest.fixture(scope="module")
def pack(helsinki_pack: Path):  # type: ignore[no-untyped-def]
    from rig.maps.query import MapPack

    return MapPack(helsinki_pack)


@pytest.fixture(scope="module")
def dataset(pack):  # type: ignore[no-untyped-def]
    return generate(pack, seed=0, locations=12)


def test_setting_scales_the_paper_radii_to_the_extent() -> None:
    s = Setting.scaled(2_500.0)  # a tenth of the 25 km reference diagonal
    assert (s.search_radius_m, s.walk_radius_m, s.tiers_m, s.scale) == (500.0, 100.0, (1000.0, 2000.0), 0.1)
    big = Setting.scaled(80_000.0)  # never larger than the paper's radii
    assert (big.search_radius_m, big.walk_radius_m, big.tiers_m) == (5000.0, 1000.0, (10000.0, 20000.0))
    over = Setting.scaled(2_500.0, search_radius_m=300, walk_radius_m=40)
    assert (over.search_radius_m, over.walk_radius_m, over.tiers_m) == (300.0, 40.0, (600.0, 1200.0))
    assert [s.tier(x) for x in (0, 999.9, 1000, 1999, 2000, 9e9)] == [1, 1, 2, 2, 3, 3]
    assert Setting.paper().tier_labels() == ("<10 km", "<20 km", "No Limit")
    assert s.tier_labels() == ("<1 km", "<2 km", "No Limit")
    assert Setting.scaled(1944.6).tier_labels() == ("<778 m", "<1556 m", "No Limit")


def test_helsinki_setting(pack) -> None:  # type: ignore[no-untyped-def]
    s = setting_for(pack)
    e = pack.info.extent
    diag = haversine_m(e.min_lat, e.min_lon, e.max_lat, e.max_lon)
    assert s.extent_diag_m == pytest.approx(diag, abs=0.1)
    assert s.search_radius_m == round(5000 * diag / 25_000)
    assert s.walk_radius_m == round(1000 * diag / 25_000)


def test_kmeans_1d_hand_case() -> None:
    labels, cent = kmeans_1d(np.array([0.0, 0.1, 0.2, 5.0, 5.2, 10.0, 10.4]), 3)
    assert list(labels) == [0, 0, 0, 1, 1, 2, 2]
    assert cent == pytest.approx([0.1, 5.1, 10.2])
    labels, cent = kmeans_1d(np.array([1.0, 1.0, 1.0]), 4)  # fewer distinct values than tiers
    assert list(labels) == [0, 0, 0] and len(cent) == 1


def test_locations_are_distinct_drive_nodes_and_favour_dense_tiers(pack) -> None:  # type: ignore[no-untyped-def]
    s = setting_for(pack)
    locs = sample_locations(pack, 60, np.random.default_rng(3), s)
    g = pack.graph
    assert len({loc["node"] for loc in locs}) == 60
    assert all(g["snap_drive"][loc["node"]] for loc in locs)
    assert all(pack.info.extent.contains(loc["lat"], loc["lon"]) for loc in locs)
    # the softmax puts more weight on the densest tier than on the sparsest
    tiers = [loc["tier"] for loc in locs]
    assert tiers.count(max(tiers)) > tiers.count(0)
    again = sample_locations(pack, 60, np.random.default_rng(3), s)
    assert again == locs


def test_generation_is_deterministic(pack, dataset) -> None:  # type: ignore[no-untyped-def]
    again = generate(pack, seed=0, locations=12)
    assert again.model_dump_json() == dataset.model_dump_json()
    other = generate(pack, seed=1, locations=12)
    assert {(q.lat, q.lon) for q in other.queries} != {(q.lat, q.lon) for q in dataset.queries}


def _brute_force_valid(pack, setting: Setting, categories: set[str]) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """station id -> ids of the POIs that make it valid, from every place of the pack, no index."""
    places = [pack.place(i) for i in range(len(pack.lat))]
    stations = [
        p for p in places if p.kind == "poi" and (p.category_key, p.category) == ("amenity", "charging_station")
    ]
    pois = []
    for p in places:
        cats = poi_categories(p.category_key, p.category)
        if p.kind != "poi" or not cats or p.category_key in NOISE_KEYS or cats <= NOISE_CATEGORIES:
            continue
        pois.append((p, cats))
    out = {}
    for s in stations:
        near = sorted(
            ((haversine_m(s.lat, s.lon, p.lat, p.lon), i, p, c) for i, (p, c) in enumerate(pois)),
            key=lambda x: (x[0], x[1]),
        )
        shown = [x for x in near if x[0] <= setting.walk_radius_m][: setting.poi_cap]
        good = [p.place_id for _, _, p, c in shown if c & categories]
        if good:
            out[s.place_id.split("/", 1)[1]] = good
    return out


def test_ground_truth_matches_brute_force(pack, dataset) -> None:  # type: ignore[no-untyped-def]
    s = dataset.setting
    n_stations = len(dataset.stations)
    assert n_stations == 4  # the Helsinki extract (README)
    checked = 0
    cache: dict[str, dict[str, list[str]]] = {}
    for q in dataset.queries:
        valid = cache.setdefault(q.intent, _brute_force_valid(pack, s, set(INTENT_BY_ID[q.intent].categories)))
        assert 0 < len(valid) < n_stations  # trivial intents (every station valid) are skipped by default
        by_id = {st.station_id: st for st in dataset.stations}
        ranked = sorted(
            valid,
            key=lambda sid: (pack.route([(q.lat, q.lon), (by_id[sid].lat, by_id[sid].lon)], "drive").distance_m, sid),
        )
        assert [a.station_id for a in q.answers] == ranked[: s.gt_size], q.id
        for a in q.answers:
            assert a.poi_keys == valid[a.station_id]
            assert a.geodesic_m == pytest.approx(geodesic_m(q.lat, q.lon, a.lat, a.lon), abs=0.06)
            assert a.drive_m is not None and a.drive_m >= haversine_m(q.lat, q.lon, a.lat, a.lon) - 0.1
        drives = [a.drive_m for a in q.answers]
        assert drives == sorted(drives)
        assert q.tier_distance_m == q.answers[0].geodesic_m
        assert q.reachable == any(haversine_m(q.lat, q.lon, a.lat, a.lon) <= s.search_radius_m for a in q.answers)
        checked += 1
    assert checked == len(dataset.queries) > 50
    # a mix of queries that need no move and queries that need exploration
    assert {q.reachable for q in dataset.queries} == {True, False}


def test_every_location_gets_every_nontrivial_intent(pack, dataset) -> None:  # type: ignore[no-untyped-def]
    intents = {q.intent for q in dataset.queries}
    locs = {(q.lat, q.lon) for q in dataset.queries}
    assert len(dataset.queries) == len(intents) * len(locs) == len(intents) * 12
    assert "coffee" not in intents  # every Helsinki station has a cafe within the walking radius
    full = generate(pack, seed=0, locations=12, skip_trivial=False)
    assert "coffee" in {q.intent for q in full.queries}
    assert any("skipped" in n for n in dataset.notes)
    coffee = [q for q in full.queries if q.intent == "coffee"]
    assert all(len(q.answers) == 4 for q in coffee)


def test_questions_come_from_templates(pack, dataset) -> None:  # type: ignore[no-untyped-def]
    for q in dataset.queries[:40]:
        it = INTENT_BY_ID[q.intent]
        assert q.template.startswith("intent") and any(a in q.question for a in it.activities)
        assert q.location_text
    seed = generate(pack, seed=0, locations=2, phrasing="seed")
    assert all(INTENT_BY_ID[q.intent].place in q.question and q.template.startswith("seed") for q in seed.queries)
    with pytest.raises(GenerationError):
        generate(pack, phrasing="poetry")


def test_radii_overrides_change_the_ground_truth(pack) -> None:  # type: ignore[no-untyped-def]
    wide = generate(pack, seed=0, locations=3, setting=setting_for(pack, walk_radius_m=400), skip_trivial=False)
    assert wide.setting.walk_radius_m == 400
    narrow = generate(pack, seed=0, locations=3, setting=setting_for(pack, walk_radius_m=20), skip_trivial=False)
    n_wide = sum(len(q.answers) for q in wide.queries)
    n_narrow = sum(len(q.answers) for q in narrow.queries)
    assert n_wide > n_narrow
    one = generate(pack, seed=0, locations=3, setting=setting_for(pack, gt_size=1), skip_trivial=False)
    assert max(len(q.answers) for q in one.queries) == 1
