from __future__ import annotations

import pytest

from rig.agents.toolkit import tool
from rig.maps.replay import ReplayPolicy, ReplayStore
from rig.maps.tools import MapService, MapToolkit, MapTools

ORIGIN = {"lat": 60.1700, "lon": 24.9440}
DEST = {"lat": 60.1650, "lon": 24.9400}


@pytest.fixture()
def service(pack, tmp_path):
    store = ReplayStore(tmp_path / "replay.sqlite")
    yield MapService(pack=pack, store=store)
    store.close()


@pytest.fixture(scope="module")
def checker(pack, tmp_path_factory):
    """One service for the many malformed calls: they are refused before the store is read."""
    store = ReplayStore(tmp_path_factory.mktemp("replay") / "replay.sqlite")
    yield MapService(pack=pack, store=store)
    store.close()


@pytest.mark.parametrize(
    "tool, args, fragment",
    [
        ("geocode", {}, "missing required"),
        ("geocode", {"query": ""}, "at least 1"),
        ("geocode", {"query": 42}, "expected string"),
        ("geocode", {"query": "x" * 5000}, "exceeds"),
        ("geocode", {"query": "'; DROP TABLE x;--"}, "injection"),
        ("geocode", {"query": "Ateneum", "limit": "5"}, "expected integer"),
        ("geocode", {"query": "Ateneum", "limit": 2.5}, "expected integer"),
        ("geocode", {"query": "Ateneum", "limit": True}, "expected integer"),
        ("geocode", {"query": "Ateneum", "bogus": 1}, "unexpected"),
        ("geocode", "{not json", "not valid JSON"),
        ("geocode", [1, 2], "expected object"),
        ("nearby", {"lat": "60.17", "lon": 24.94}, "expected number"),
        ("nearby", {"lat": 24.94, "lon": 60.17}, "swapped"),
        ("nearby", {"lat": float("nan"), "lon": 24.94}, "finite"),
        ("nearby", {"lat": 60.17, "lon": float("inf")}, "finite"),
        ("nearby", {"lat": 60.17, "lon": 24.94, "radius_m": 1e9}, "maximum"),
        ("nearby", {"lat": 60.17, "lon": 24.94, "radius_m": -5}, "greater than"),
        ("nearby", {"lat": 60.17, "lon": 24.94, "category": "cafe\x00"}, "control"),
        ("reverse_geocode", {"lat": 95, "lon": 24.9}, "swapped"),
        ("reverse_geocode", {"lat": 60.1, "lon": 200}, "outside"),
        ("route", {"origin": ORIGIN}, "missing required"),
        ("route", {"origin": ORIGIN, "destination": {"lat": 60.1}}, "missing required"),
        ("route", {"origin": ORIGIN, "destination": DEST, "mode": "fly"}, "not one of"),
        ("route", {"origin": ORIGIN, "destination": DEST, "avoid": ["volcanoes"]}, "not one of"),
        ("route", {"origin": ORIGIN, "destination": DEST, "avoid": ["tolls", "tolls"]}, "unique"),
        ("route", {"origin": ORIGIN, "destination": DEST, "waypoints": [ORIGIN] * 9}, "at most"),
        ("route", {"origin": "60.17,24.94", "destination": DEST}, "expected object"),
        ("distance", {"a": ORIGIN, "b": DEST, "kind": "manhattan"}, "not one of"),
    ],
)
def test_malformed_arguments_are_tool_errors(checker, tool, args, fragment) -> None:
    r = checker.call(tool, args)
    assert not r.ok and r.error_category == "invalid_arguments"
    assert fragment.lower() in r.error.lower()
    assert checker.store.counts.total() == 0  # refused before any lookup


def test_unknown_tool(service) -> None:
    r = service.call("teleport", {})
    assert not r.ok and r.error_category == "unknown_tool"
    assert not service.call(None, {}).ok  # type: ignore[arg-type]


def test_pack_answers_are_labelled(service) -> None:
    r = service.call("geocode", {"query": "Ateneum"})
    assert r.ok and r.source == "pack" and r.data[0]["name"] == "Ateneum"
    assert r.meta["arguments"] == {"query": "Ateneum", "limit": 5}
    route = service.call("route", {"origin": ORIGIN, "destination": DEST, "mode": "walk"})
    assert route.ok and route.data["distance_m"] > 0
    near = service.call("nearby", {"lat": 60.1699, "lon": 24.9384, "radius_m": 200, "category": "cafe"})
    assert near.ok and all(p["distance_m"] <= 200 for p in near.data)
    assert service.call("search_stations", {"lat": 60.17, "lon": 24.94}).ok
    assert service.call("reverse_geocode", {"lat": 60.17, "lon": 24.94}).ok
    d = service.call("distance", {"a": ORIGIN, "b": DEST, "kind": "network", "mode": "drive"})
    assert d.ok and d.data["mode"] == "drive"


def test_replay_chain_hit_fuzzy_miss(service) -> None:
    store = service.store
    store.put("rig", "geocode", {"query": "Ateneum", "limit": 5}, [{"name": "recorded"}])
    hit = service.call("geocode", {"query": " ATENEUM"})
    assert hit.source == "hit" and hit.data == [{"name": "recorded"}]
    fuzzy = service.call("geocode", {"query": "Ateneumm"})
    assert fuzzy.source == "fuzzy" and fuzzy.meta["similarity"] >= 90 and fuzzy.data == [{"name": "recorded"}]
    miss = service.call("geocode", {"query": "Cafe Ekberg"})
    assert miss.source == "pack" and store.misses == 1  # the store missed, the pack answered
    store.put("rig", "reverse_geocode", {"lat": 60.17, "lon": 24.94}, {"address": "recorded"})
    near = service.call("reverse_geocode", {"lat": 60.17005, "lon": 24.94005})
    assert near.source == "fuzzy" and near.meta["distance_m"] < 25


def test_strict_policy_and_no_pack(pack, tmp_path) -> None:
    store = ReplayStore(tmp_path / "strict.sqlite")
    strict = {name: ReplayPolicy() for name in ("geocode", "reverse_geocode")}
    svc = MapService(pack=None, store=store, policies=strict)
    store.put("rig", "geocode", {"query": "Ateneum", "limit": 5}, [{"name": "recorded"}])
    assert svc.call("geocode", {"query": "ateneum"}).source == "hit"
    r = svc.call("geocode", {"query": "Ateneumm"})
    assert not r.ok and r.source == "miss" and r.error_category == "replay_miss"
    assert svc.counts["miss"] == 1 and store.misses == 1
    store.close()


def test_no_route_is_a_tool_error(service) -> None:
    r = service.call("route", {"origin": ORIGIN, "destination": {"lat": 10.0, "lon": 10.0}})
    assert not r.ok and r.error_category == "no_route"


def test_handler_exception_never_escapes(pack) -> None:
    class Boom(MapToolkit):
        @tool()
        def boom(self) -> None:
            """x"""
            raise RuntimeError("kaboom")

    r = MapService(pack=pack, tools=Boom(pack)).call("boom", {})
    assert not r.ok and r.error_category == "internal_error" and "kaboom" in r.error


def test_schemas_and_toolkit() -> None:
    assert MapTools().names() == ["geocode", "reverse_geocode", "route", "nearby", "search_stations", "distance"]

    class Patterned(MapToolkit):
        @tool(x={"pattern": "a"})
        def x(self, x: str) -> None:
            """x"""

    with pytest.raises(ValueError):  # a keyword the map validator does not know is refused at service creation
        MapService(tools=Patterned())
    schema = MapService().schemas()[0]
    assert schema["type"] == "function" and schema["function"]["name"] == "geocode"


def test_recorded_only_tools_are_not_answered_from_the_pack(pack) -> None:
    class Recorded(MapTools):
        recorded_only = ("geocode",)

    r = MapService(pack=pack, tools=Recorded(pack)).call("geocode", {"query": "Ateneum"})
    assert not r.ok and r.error_category == "replay_miss" and r.source == "miss"
