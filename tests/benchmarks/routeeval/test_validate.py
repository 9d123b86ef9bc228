"""RouteEval validation on the embedded Helsinki pack: geocoding rules, route-type handling, leg sums."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.benchmarks.routeeval.validate import METRES_PER_MILE, RouteValidator, Site, address_candidates, name_matches


@pytest.fixture(scope="module")
def pack(helsinki_pack: Path):  # type: ignore[no-untyped-def]
    from rig.maps.query import MapPack

    return MapPack.open(helsinki_pack)


@pytest.fixture()
def validator(pack) -> RouteValidator:  # type: ignore[no-untyped-def]
    return RouteValidator([Site("helsinki", pack)], {"Helsinki Cathedral": "Helsingin tuomiokirkko"})


def test_address_candidates_drop_trailing_parts() -> None:
    assert address_candidates("Ateneum, Kaivokatu 2, Helsinki") == [
        "Ateneum, Kaivokatu 2, Helsinki",
        "Ateneum, Kaivokatu 2",
        "Ateneum",
    ]
    assert address_candidates(" , Kiasma ,") == ["Kiasma"]
    assert address_candidates("") == []


@pytest.mark.parametrize(
    ("query", "name", "ok"),
    [
        ("Kiasma museum", "Kiasma", True),  # extra words in the query are fine
        ("Kiasmaa", "Kiasma", True),  # a typo
        ("Tuomiokirkko, Helsinki", "Helsingin tuomiokirkko", True),  # city words (and their genitive) aside
        ("Central Park, New York, NY", "New Bamboo Center", False),  # shares a word, not the place
        ("Park", "Hostel Diana Park (Erottajanpuisto)", False),
        ("Oodi Library", "BR", False),
        ("Helsinki", "Helsinki", False),  # only the city's name
    ],
)
def test_name_matches(query: str, name: str, ok: bool) -> None:
    assert name_matches(query, name, {"helsinki"}) is ok


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("Ateneum", "Ateneum"),
        ("Ateneum, Helsinki, Finland", "Ateneum"),
        ("Kiasma Museum", "Kiasma"),
        ("Kaivokatu 2, 00100 Helsinki", "Kaivokatu 2"),
        ("Helsinki Cathedral", "Helsingin tuomiokirkko"),  # through the alias
        ("Stockmann department store", "Stockmann"),
        ("Central Park, New York, NY", None),
        ("Times Square", None),
        ("Helsinki, Finland", None),  # a city is not a waypoint
    ],
)
def test_geocode_rule(validator: RouteValidator, address: str, expected: str | None) -> None:
    g = validator.geocode(0, address, "Helsinki")
    assert (g.name if g else None) == expected


def test_city_not_covered_by_the_pack(validator: RouteValidator) -> None:
    assert validator.site_for("Helsinki") is validator.sites[0]
    assert validator.site_for("Palo Alto, CA") is None
    m = validator.measure("loop", ["Ateneum", "Kiasma"], "Palo Alto, CA")
    assert not m.ok and m.error_category == "other"


def _points(pack, names: list[str]) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    out = []
    for n in names:
        g = pack.geocode(n, "Helsinki", limit=1)[0]
        out.append((g.lat, g.lon))
    return out


def test_loop_returns_to_start(pack, validator: RouteValidator) -> None:  # type: ignore[no-untyped-def]
    names = ["Ateneum", "Kaisaniemen puisto", "Suomen Kansallisteatteri"]
    m = validator.measure("loop", names, "Helsinki", closed=True)
    pts = _points(pack, names)
    assert m.ok and m.closed_by_validator and m.routed == [*pts, pts[0]]
    assert m.distance_m == pytest.approx(pack.route([*pts, pts[0]], "walk").distance_m, abs=0.01)
    # the model closing the loop itself is not closed twice
    m2 = validator.measure("loop", [*names, "Ateneum"], "Helsinki", closed=True)
    assert not m2.closed_by_validator and m2.distance_m == pytest.approx(m.distance_m, abs=0.01)


def test_out_and_back_doubles_the_way_out(pack, validator: RouteValidator) -> None:  # type: ignore[no-untyped-def]
    names = ["Helsingin päärautatieasema", "Kaisaniemen kasvitieteellinen puutarha"]
    m = validator.measure("out-and-back", names, "Helsinki", closed=True)
    one_way = pack.route(_points(pack, names), "walk").distance_m
    assert m.ok and m.doubled and m.distance_m == pytest.approx(2 * one_way, abs=0.01)
    # the way back written out by the model is not doubled again
    m2 = validator.measure("out-and-back", [*names, names[0]], "Helsinki", closed=True)
    assert not m2.doubled and m2.distance_m == pytest.approx(m.distance_m, rel=1e-6)


def test_point_to_point_is_measured_as_given(pack, validator: RouteValidator) -> None:  # type: ignore[no-untyped-def]
    names = ["Kiasma", "Vanha kirkkopuisto", "Kolmikulma", "Vanha Kauppahalli"]
    m = validator.measure("point-to-point", names, "Helsinki")
    pts = _points(pack, names)
    whole = pack.route(pts, "walk")
    assert m.ok and not m.doubled and not m.closed_by_validator
    assert m.legs_m == pytest.approx([leg.distance_m for leg in whole.legs], abs=0.01)
    assert m.miles == pytest.approx(whole.distance_m / METRES_PER_MILE)


def test_invalid_waypoint_stops_at_the_first(validator: RouteValidator) -> None:
    m = validator.measure("loop", ["Ateneum", "Eiffel Tower, Paris", "Kiasma"], "Helsinki")
    assert not m.ok and m.error_category == "invalid_waypoint" and "Eiffel Tower" in (m.error or "")
    assert [g.name for g in m.waypoints] == ["Ateneum"]


def test_repeated_place_is_a_zero_leg(validator: RouteValidator) -> None:
    m = validator.measure("point-to-point", ["Ateneum", "Ateneum", "Kiasma"], "Helsinki")
    assert m.ok and m.legs_m[0] == 0.0 and m.legs_m[1] > 0


def test_replay_store_answers_before_the_pack(tmp_path: Path, pack) -> None:  # type: ignore[no-untyped-def]
    """A recorded cache of a city no pack covers: geocode and route answers come from the store."""
    from rig.benchmarks.routeeval.validate import store_cities
    from rig.maps.replay import ReplayStore
    from rig.maps.tools import MapService

    store = ReplayStore(tmp_path / "replay.sqlite")
    MapService(None, store)  # registers the rig tools' key specs
    a, b = {"lat": 37.4443, "lon": -122.1598}, {"lat": 37.4419, "lon": -122.1430}
    store.put(
        "rig",
        "geocode",
        {"query": "University Avenue", "city": "Palo Alto, CA", "limit": 5},
        [{"name": "University Avenue", "lat": a["lat"], "lon": a["lon"], "match": "exact"}],
    )
    store.put(
        "rig",
        "geocode",
        {"query": "Palo Alto City Hall", "city": "Palo Alto, CA", "limit": 5},
        {
            "status": "OK",
            "results": [
                {"formatted_address": "250 Hamilton Ave", "geometry": {"location": {"lat": b["lat"], "lng": b["lon"]}}}
            ],
        },
    )
    leg = {"mode": "walk", "waypoints": [], "avoid": []}  # keyed as the route tool validates them (defaults filled)
    store.put("rig", "route", {"origin": a, "destination": b, **leg}, {"distance_m": 1500.0})
    store.put(
        "rig", "route", {"origin": b, "destination": a, **leg}, {"routes": [{"legs": [{"distance": {"value": 1700}}]}]}
    )
    assert store_cities(tmp_path / "replay.sqlite", "rig") == {"palo alto, ca"}
    v = RouteValidator(
        [
            Site("helsinki", pack, store),
            Site("replay", None, store, cities=store_cities(tmp_path / "replay.sqlite", "rig")),
        ]
    )
    assert v.site_for("Palo Alto, CA") is v.sites[1]
    m = v.measure("loop", ["University Avenue", "Palo Alto City Hall"], "Palo Alto, CA", closed=True)
    assert m.ok and m.site == "replay" and m.distance_m == pytest.approx(3200.0)
    assert [g.match for g in m.waypoints] == ["exact", "provider"]
    m2 = v.measure("loop", ["University Avenue", "Stanford Stadium"], "Palo Alto, CA")
    assert not m2.ok and m2.error_category == "invalid_waypoint"
    store.close()


def test_default_measure_is_the_papers_waypoints_in_sequence(pack, validator: RouteValidator) -> None:  # type: ignore[no-untyped-def]
    """Paper sec. 3.1: one route "with all waypoints in sequence"; nothing is appended or doubled by default."""
    names = ["Ateneum", "Kaisaniemen puisto", "Suomen Kansallisteatteri"]
    pts = _points(pack, names)
    as_written = pack.route(pts, "walk").distance_m
    loop = validator.measure("loop", names, "Helsinki")
    assert loop.ok and not loop.closed_by_validator and loop.routed == pts
    assert loop.distance_m == pytest.approx(as_written, abs=0.01)
    closed = validator.measure("loop", names, "Helsinki", closed=True)
    assert closed.distance_m > loop.distance_m + 1  # the way home counts only in the closed measure
    oab = validator.measure("out-and-back", names[:2], "Helsinki")
    assert oab.ok and not oab.doubled
    assert oab.distance_m == pytest.approx(pack.route(pts[:2], "walk").distance_m, abs=0.01)
