from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from rig.maps.geo import haversine_m
from rig.maps.routing import RoutingError


def _place(pack, name):
    top = pack.geocode(name)[0]
    assert top.name == name
    return top.lat, top.lon


def test_walking_route_between_named_places(pack) -> None:
    a, b = _place(pack, "Ateneum"), _place(pack, "Cafe Ekberg")
    gc = haversine_m(*a, *b)
    r = pack.route([a, b], "walk")
    assert gc <= r.distance_m <= 2 * gc
    assert r.duration_s == pytest.approx(r.distance_m / (5 / 3.6), rel=0.25)  # ~5 km/h, stairs slower
    leg = r.legs[0]
    assert leg.steps[0].maneuver == "depart"
    assert sum(s.distance_m for s in leg.steps) == pytest.approx(leg.distance_m, abs=0.01)
    geom = r.geometry()
    assert geom[0] == a and geom[-1] == b


def test_route_through_waypoints_is_sum_of_legs(pack) -> None:
    pts = [
        _place(pack, "Ateneum"),
        _place(pack, "Stockmann"),
        _place(pack, "Cafe Ekberg"),
        _place(pack, "Suomen Kansallisteatteri"),
    ]
    for mode in ("walk", "bike", "drive"):
        r = pack.route(pts, mode)
        assert len(r.legs) == 3
        assert r.distance_m == pytest.approx(sum(leg.distance_m for leg in r.legs), abs=0.01)
        assert r.duration_s == pytest.approx(sum(leg.duration_s for leg in r.legs), abs=0.01)
        separate = [pack.route([p, q], mode).distance_m for p, q in pairwise(pts)]
        assert r.distance_m == pytest.approx(sum(separate), abs=0.01)
        assert [(leg.start.lat, leg.start.lon) for leg in r.legs] == pts[:-1]


def _oneway_drive_edge(pack):
    g = pack.graph
    drive = (g["modes"] & 4) > 0
    pairs = set(zip(g["src"][drive].tolist(), g["dst"][drive].tolist(), strict=True))
    snap = g["snap_drive"]
    for e in np.nonzero(drive)[0]:
        u, v = int(g["src"][e]), int(g["dst"][e])
        if (v, u) not in pairs and snap[u] and snap[v] and g["length_m"][e] > 30:
            return e, u, v
    pytest.fail("no one-way drivable edge in the Helsinki extract")


def test_one_way_streets_respected_when_driving(pack) -> None:
    e, u, v = _oneway_drive_edge(pack)
    g = pack.graph
    a = (float(g["node_lat"][u]), float(g["node_lon"][u]))
    b = (float(g["node_lat"][v]), float(g["node_lon"][v]))
    length = float(g["length_m"][e])
    forward = pack.route([a, b], "drive")
    backward = pack.route([b, a], "drive")
    assert forward.distance_m == pytest.approx(length, abs=0.5)
    assert backward.distance_m > length + 10  # must go around the block
    # Walking ignores the car one-way: both directions are the short way.
    assert pack.route([b, a], "walk").distance_m <= length + 0.5


def test_avoid_options(pack) -> None:
    a, b = _place(pack, "Ateneum"), _place(pack, "Cafe Ekberg")
    r = pack.route([a, b], "walk", avoid={"steps"})
    assert all("steps" not in s.flags for leg in r.legs for s in leg.steps)
    assert r.avoid == ["steps"]
    with pytest.raises(ValueError):
        pack.route([a, b], "walk", avoid={"volcanoes"})


def test_route_errors(pack) -> None:
    a = _place(pack, "Ateneum")
    with pytest.raises(RoutingError):
        pack.route([a, (0.0, 0.0)], "walk")
    with pytest.raises(ValueError):
        pack.route([a], "walk")
    with pytest.raises(ValueError):
        pack.route([a, a], "teleport")
    same = pack.route([a, a], "walk")
    assert same.distance_m == pytest.approx(2 * same.legs[0].start_snap_m, abs=0.01)


def test_csr_entries_map_back_to_their_edges(pack) -> None:
    g = pack.graph
    for mode in ("walk", "bike", "drive"):
        mg = pack.router.graph(mode, 0)
        rows = np.repeat(np.arange(len(mg.indptr) - 1), np.diff(mg.indptr))
        assert (g["src"][mg.edge_of_entry] == rows).all()
        assert (g["dst"][mg.edge_of_entry] == mg.indices).all()
