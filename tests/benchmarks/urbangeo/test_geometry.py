"""UrbanGeoEval ground-truth functions against hand-computed cases: distances, bearings, relations, visiting
orders, small networks and opening hours."""

from __future__ import annotations

import math

import pytest

from rig.benchmarks.urbangeo import geometry as G
from rig.benchmarks.urbangeo import hours as H
from rig.maps.geo import offset

R_KM = 6371.0088  # mean Earth radius used by the haversine ground truth


def dms(d: int, m: int, s: int) -> float:
    return d + m / 60 + s / 3600


def test_distance_hand_computed() -> None:
    # One degree along a meridian is R * pi / 180; a quarter meridian is R * pi / 2.
    assert G.distance_km((0.0, 0.0), (1.0, 0.0)) == pytest.approx(R_KM * math.pi / 180, abs=1e-6)
    assert G.distance_km((0.0, 0.0), (90.0, 0.0)) == pytest.approx(R_KM * math.pi / 2, abs=1e-6)
    # Along the equator too; and symmetric.
    assert G.distance_km((0.0, 10.0), (0.0, 12.0)) == pytest.approx(2 * R_KM * math.pi / 180, abs=1e-6)
    a, b = (60.1699, 24.9384), (59.4370, 24.7536)  # Helsinki and Tallinn city centres
    assert 80.0 < G.distance_km(a, b) < 83.0
    assert G.distance_km(a, b) == pytest.approx(G.distance_km(b, a))


def test_distance_matches_the_papers_worked_example() -> None:
    # Figure 33: White House to Pentagon, ground truth 3.34 km.
    d = G.distance_km((dms(38, 53, 51), -dms(77, 2, 11)), (dms(38, 52, 18), -dms(77, 3, 22)))
    assert round(d, 2) == 3.34


def test_bearings_hand_computed() -> None:
    o = (0.0, 0.0)
    assert G.bearing(o, (1.0, 0.0)) == pytest.approx(0.0)
    assert G.bearing(o, (0.0, 1.0)) == pytest.approx(90.0)
    assert G.bearing(o, (-1.0, 0.0)) == pytest.approx(180.0)
    assert G.bearing(o, (0.0, -1.0)) == pytest.approx(270.0)
    # On the sphere the bearing to (1, 1) is atan(cos 1 deg), a little under 45 degrees.
    assert G.bearing(o, (1.0, 1.0)) == pytest.approx(math.degrees(math.atan(math.cos(math.radians(1)))), abs=1e-9)
    # Figure 34: British Museum to Tower of London, ground truth 109.74 degrees.
    assert round(G.bearing((51.5196, -0.1270), (51.5082, -0.0760)), 2) == 109.74


@pytest.mark.parametrize(
    "deg,eight,sixteen",
    [
        (0.0, "North", "North"),
        (22.4, "North", "North-Northeast"),
        (22.6, "Northeast", "North-Northeast"),
        (44.99, "Northeast", "Northeast"),
        (108.3, "East", "East-Southeast"),
        (180.0, "South", "South"),
        (247.6, "West", "West-Southwest"),
        (359.0, "North", "North"),
        (-90.0, "West", "West"),
    ],
)
def test_cardinals(deg: float, eight: str, sixteen: str) -> None:
    assert G.cardinal8(deg) == eight
    assert G.cardinal16(deg) == sixteen


def test_angle_diff_wraps() -> None:
    assert G.angle_diff(359.0, 1.0) == pytest.approx(2.0)
    assert G.angle_diff(10.0, 190.0) == pytest.approx(180.0)


BASE = (60.17, 24.94)


def at(north_m: float, east_m: float) -> tuple[float, float]:
    return offset(BASE[0], BASE[1], north_m, east_m)


def square(n0: float, e0: float, size: float) -> list[tuple[float, float]]:
    return [at(n0, e0), at(n0, e0 + size), at(n0 + size, e0 + size), at(n0 + size, e0)]


@pytest.mark.parametrize(
    "other,expected",
    [
        (square(50, 50, 100), "Overlapping"),  # a quarter of each shared
        (square(0, 105, 100), "Adjacent"),  # 5 m gap along a whole side
        (square(0, 200, 100), "Separate"),  # 100 m apart
        (square(0, 120, 100), None),  # 20 m: between "shared" (15 m) and "clearly apart" (30 m)
        (square(10, 10, 30), "Overlapping"),  # inside
    ],
)
def test_area_area(other: list, expected: str | None) -> None:
    assert G.area_area_relation(square(0, 0, 100), other) == expected


@pytest.mark.parametrize(
    "road,expected",
    [
        ([at(50, -50), at(50, 150)], "Pass through"),  # straight across the middle
        ([at(-5, -50), at(-5, 150)], "Touch"),  # along the south side, 5 m outside
        ([at(5, -50), at(5, 150)], "Touch"),  # along the south side, 5 m inside: never deeper than 15 m
        ([at(-100, -50), at(-100, 150)], "Lie outside"),
        ([at(-22, -50), at(-22, 150)], None),  # 22 m away: unclear
    ],
)
def test_road_area(road: list, expected: str | None) -> None:
    assert G.road_area_relation(road, square(0, 0, 100)) == expected


@pytest.mark.parametrize(
    "r2,expected",
    [
        ([at(-100, 100), at(100, 100)], "Intersecting"),  # crosses in the middle
        ([at(50, 0), at(50, 200)], "Parallel"),  # 50 m to the north, same direction, same extent
        ([at(-300, 300), at(-100, 300)], "Disconnected"),  # perpendicular, 100 m apart, no crossing
        ([at(5, 100), at(100, 100)], None),  # a T-junction ending 5 m short of the road: unclear
        ([at(-50, 0), at(50, 5)], None),  # crossing within 15 m of an end point
    ],
)
def test_road_road(r2: list, expected: str | None) -> None:
    assert G.road_road_relation([at(0, 0), at(0, 200)], r2) == expected


def test_sampling_is_uniform() -> None:
    ring = square(0, 0, 100)  # 400 m around
    pts = G.sample_ring(ring, 8)
    assert len(pts) == 8 and pts[0] == pytest.approx(ring[0])
    steps = [G.distance_km(a, b) * 1000 for a, b in zip(pts, pts[1:] + pts[:1], strict=True)]
    assert steps == pytest.approx([50.0] * 8, abs=0.05)
    line = [at(0, 0), at(0, 30), at(0, 100)]
    s = G.sample_polyline(line, 5)
    assert s[0] == pytest.approx(line[0]) and s[-1] == pytest.approx(line[-1])
    assert [G.distance_km(line[0], p) * 1000 for p in s] == pytest.approx([0, 25, 50, 75, 100], abs=0.01)


def test_optimal_order_is_exact_not_greedy() -> None:
    # Stops on a line at +1, -1.5 and +3 km. Greedy nearest-neighbour goes +1, +3, -1.5 (7.5 km); the optimum
    # goes -1.5, +1, +3 (1.5 + 2.5 + 2 = 6.0 km).
    start = at(0, 0)
    stops = [at(0, 1000), at(0, -1500), at(0, 3000)]
    order, best, second = G.optimal_order(start, stops)
    assert order == [1, 0, 2]
    assert best == pytest.approx(6.0, abs=0.01)
    assert second > best + 0.5


def test_hamming_counts_misplaced_positions() -> None:
    truth = ["S", "A", "B", "C", "D"]
    assert G.hamming(["S", "A", "C", "B", "D"], truth) == 2
    assert G.hamming(truth, truth) == 0
    assert G.hamming(["S", "A"], truth) == 3  # missing positions are misplaced


def test_small_network_paths() -> None:
    # 0-1-3 (1 + 1) and 0-2-3 (1.5 + 1) and a spur 3-4.
    edges = [(0, 1, 1.0), (1, 3, 1.0), (0, 2, 1.5), (2, 3, 1.0), (3, 4, 0.5)]
    path, length = G.shortest_path(5, edges, 0, 3)
    assert path == [0, 1] and length == pytest.approx(2.0)
    assert G.simple_path_lengths(edges, 0, 3) == pytest.approx([2.0, 2.5])
    with pytest.raises(ValueError):
        G.shortest_path(6, edges, 0, 5)


def test_turn_words() -> None:
    assert G.turn_word(0, 90) == "turn right"
    assert G.turn_word(0, 270) == "turn left"
    assert G.turn_word(10, 15) == "continue straight"
    assert G.turn_word(0, 180) == "make a U-turn"


def test_opening_hours() -> None:
    w = H.parse("Mo-Fr 10:00-18:00; Sa 11:00-16:00; Su off")
    assert H.is_open(w, 0, 10 * 60) and not H.is_open(w, 0, 18 * 60) and not H.is_open(w, 6, 12 * 60)
    night = H.parse("Mo-Th 17:00-03:00; Fr-Su 15:00-03:00")
    assert H.is_open(night, 1, 60)  # Tuesday 01:00 is still Monday night
    assert not H.is_open(night, 0, 16 * 60)
    assert H.margin_minutes(night, 0, 16 * 60) == 60
    assert H.parse("Mo,Tu 08:00-22:00; We-Sa 08:00-24:00, Su 09:00-22:00")[6] == [(540, 1320)]
    assert H.parse("24/7")[3] == [(0, 1440)]
    for bad in ("Seasonal, only summer time", 'Mo-Fr 11:00-15:00 open "Lunch"', "Mo-Fr 16:00-", None):
        assert H.parse(bad) is None
