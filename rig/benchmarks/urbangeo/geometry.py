"""Ground truth computed from coordinates: distances, bearings, spatial relations, visiting orders.

Every function takes (lat, lon) pairs in degrees. Relations are decided on exactly the sampled geometry a prompt
shows (not on the full OSM geometry), with a stated tolerance and a "no clear answer" band in between, because
sampled coordinates never touch exactly and a benchmark question must have one right answer.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rig.maps.geo import EARTH_RADIUS_M, bearing_deg, haversine_m

LatLon = tuple[float, float]

CARDINAL_8 = ("North", "Northeast", "East", "Southeast", "South", "Southwest", "West", "Northwest")
CARDINAL_16 = (
    "North",
    "North-Northeast",
    "Northeast",
    "East-Northeast",
    "East",
    "East-Southeast",
    "Southeast",
    "South-Southeast",
    "South",
    "South-Southwest",
    "Southwest",
    "West-Southwest",
    "West",
    "West-Northwest",
    "Northwest",
    "North-Northwest",
)
ABBREV_16 = ("N", "NNE", "NE", "ENE", "E", "ESE", "SE", "SSE", "S", "SSW", "SW", "WSW", "W", "WNW", "NW", "NNW")

# Relation tolerance: boundaries closer than this count as meeting (stated in the prompts).
TOUCH_M = 15.0

ROAD_ROAD = ("Intersecting", "Parallel", "Disconnected")
ROAD_AREA = ("Pass through", "Touch", "Lie outside")
AREA_AREA = ("Overlapping", "Adjacent", "Separate")


def distance_km(a: LatLon, b: LatLon) -> float:
    """Great-circle (haversine) distance on the mean Earth sphere, in km."""
    return haversine_m(a[0], a[1], b[0], b[1]) / 1000.0


def bearing(a: LatLon, b: LatLon) -> float:
    """Initial bearing from a to b, degrees clockwise from true north in [0, 360)."""
    return bearing_deg(a[0], a[1], b[0], b[1])


def cardinal8(deg: float) -> str:
    return CARDINAL_8[int(((deg % 360.0) + 22.5) // 45.0) % 8]


def cardinal16(deg: float) -> str:
    return CARDINAL_16[int(((deg % 360.0) + 11.25) // 22.5) % 16]


def angle_diff(a: float, b: float) -> float:
    """Smallest absolute difference of two bearings, in [0, 180]."""
    d = abs(a - b) % 360.0
    return min(d, 360.0 - d)


# ---- a local metric plane --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plane:
    """Equirectangular projection around a reference point: metres east (x) and north (y). Exact enough at city
    scale (< 0.1% over a few km), and it lets shapely measure lengths and areas in metres."""

    lat0: float
    lon0: float

    @classmethod
    def around(cls, points: Sequence[LatLon]) -> Plane:
        return cls(sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points))

    def xy(self, p: LatLon) -> tuple[float, float]:
        k = math.cos(math.radians(self.lat0))
        return (math.radians(p[1] - self.lon0) * EARTH_RADIUS_M * k, math.radians(p[0] - self.lat0) * EARTH_RADIUS_M)

    def line(self, pts: Sequence[LatLon]):
        from shapely.geometry import LineString

        return LineString([self.xy(p) for p in pts])

    def polygon(self, ring: Sequence[LatLon]):
        from shapely.geometry import Polygon

        return Polygon([self.xy(p) for p in ring])


def polyline_length_m(pts: Sequence[LatLon]) -> float:
    return sum(haversine_m(a[0], a[1], b[0], b[1]) for a, b in itertools.pairwise(pts))


def sample_polyline(pts: Sequence[LatLon], n: int) -> list[LatLon]:
    """n points at equal distances along a polyline, both ends included (the paper's "sampled along the
    centerline")."""
    if n < 2:
        raise ValueError("a polyline sample needs at least 2 points")
    cum = [0.0]
    for a, b in itertools.pairwise(pts):
        cum.append(cum[-1] + haversine_m(a[0], a[1], b[0], b[1]))
    total = cum[-1]
    if total <= 0:
        return [tuple(pts[0])] * n  # type: ignore[list-item]
    out: list[LatLon] = []
    j = 0
    for i in range(n):
        t = total * i / (n - 1)
        while j < len(cum) - 2 and cum[j + 1] < t:
            j += 1
        seg = cum[j + 1] - cum[j]
        f = 0.0 if seg <= 0 else min(1.0, max(0.0, (t - cum[j]) / seg))
        a, b = pts[j], pts[j + 1]
        out.append((a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1])))
    return out


def sample_ring(ring: Sequence[LatLon], n: int) -> list[LatLon]:
    """n points at equal distances around a closed ring (first point not repeated): the paper's AOI boundary of
    6-10 uniformly sampled coordinates."""
    closed = list(ring) if tuple(ring[0]) == tuple(ring[-1]) else [*ring, ring[0]]
    return sample_polyline(closed, n + 1)[:-1]


def round_pts(pts: Sequence[LatLon], digits: int = 5) -> list[LatLon]:
    """Coordinates as the prompt prints them; ground truth is computed on these, not on the unrounded ones."""
    return [(round(p[0], digits), round(p[1], digits)) for p in pts]


# ---- spatial relations ------------------------------------------------------------------------------------------


def _chord_bearing(line) -> float:
    (x0, y0), (x1, y1) = line.coords[0], line.coords[-1]
    return math.degrees(math.atan2(x1 - x0, y1 - y0)) % 180.0  # an undirected line's direction


def _projection_overlap(a, b, direction_deg: float) -> float:
    """How much of the shorter line's extent along ``direction`` the other line also covers (0..1)."""
    ux, uy = math.sin(math.radians(direction_deg)), math.cos(math.radians(direction_deg))

    def span(line) -> tuple[float, float]:
        vals = [x * ux + y * uy for x, y in line.coords]
        return min(vals), max(vals)

    (a0, a1), (b0, b1) = span(a), span(b)
    shorter = min(a1 - a0, b1 - b0)
    if shorter <= 0:
        return 0.0
    return max(0.0, min(a1, b1) - max(a0, b0)) / shorter


def road_road_relation(r1: Sequence[LatLon], r2: Sequence[LatLon], touch_m: float = TOUCH_M) -> str | None:
    """Intersecting, Parallel or Disconnected for two sampled road polylines; None when no label is clear.

    Intersecting: the polylines cross, away from their ends (a crossing within touch_m of an end point is a
    T-junction or a near miss: unclear). Parallel: no crossing, general directions (end to end) within 20 degrees,
    each covering at least half of the other's extent along that direction, and at most 300 m apart.
    Disconnected: no crossing, more than touch_m apart, and clearly not parallel (directions 35 degrees or more
    apart, or little side-by-side extent, or more than 500 m apart)."""
    plane = Plane.around([*r1, *r2])
    a, b = plane.line(r1), plane.line(r2)
    if a.intersects(b):
        from shapely.geometry import Point

        inter = a.intersection(b)
        ends = [Point(c) for c in (a.coords[0], a.coords[-1], b.coords[0], b.coords[-1])]
        if any(inter.distance(e) < touch_m for e in ends):
            return None
        return "Intersecting"
    gap = a.distance(b)
    if gap < touch_m:
        return None
    da, db = _chord_bearing(a), _chord_bearing(b)
    turn = abs(da - db)
    turn = min(turn, 180.0 - turn)
    overlap = _projection_overlap(a, b, (da + db) / 2 if abs(da - db) <= 90 else ((da + db + 180) / 2) % 180)
    if turn <= 20.0 and overlap >= 0.5 and gap <= 300.0:
        return "Parallel"
    if turn >= 35.0 or overlap <= 0.2 or gap >= 500.0:
        return "Disconnected"
    return None


def road_area_relation(road: Sequence[LatLon], ring: Sequence[LatLon], touch_m: float = TOUCH_M) -> str | None:
    """Pass through, Touch or Lie outside for a sampled road and a sampled AOI ring; None when unclear.

    Pass through: at least 2 x touch_m of the road lies deeper than touch_m inside the area. Touch: the road
    comes within touch_m of the area but never deeper than touch_m inside it. Lie outside: the road stays at
    least 2 x touch_m away. Anything between those bands is ambiguous."""
    plane = Plane.around([*road, *ring])
    line, poly = plane.line(road), plane.polygon(ring)
    if not poly.is_valid or poly.area <= 0:
        return None
    core = poly.buffer(-touch_m)
    inside = 0.0 if core.is_empty else line.intersection(core).length
    gap = line.distance(poly)
    if inside >= 2 * touch_m:
        return "Pass through"
    if inside == 0.0 and gap <= touch_m:
        return "Touch"
    if gap >= 2 * touch_m:
        return "Lie outside"
    return None


def area_area_relation(r1: Sequence[LatLon], r2: Sequence[LatLon], touch_m: float = TOUCH_M) -> str | None:
    """Overlapping, Adjacent or Separate for two sampled AOI rings; None when unclear.

    Overlapping: the shared area is at least 10% of the smaller area. Adjacent: at most 2% shared, boundaries
    within touch_m of each other along at least 2 x touch_m. Separate: at least 2 x touch_m apart."""
    plane = Plane.around([*r1, *r2])
    a, b = plane.polygon(r1), plane.polygon(r2)
    if not (a.is_valid and b.is_valid) or a.area <= 0 or b.area <= 0:
        return None
    shared = a.intersection(b).area / min(a.area, b.area)
    gap = a.distance(b)
    if shared >= 0.10:
        return "Overlapping"
    if shared <= 0.02 and gap <= touch_m:
        near = a.boundary.intersection(b.buffer(touch_m)).length
        return "Adjacent" if near >= 2 * touch_m else None
    if gap >= 2 * touch_m:
        return "Separate"
    return None


# ---- planning -----------------------------------------------------------------------------------------------


def path_length_km(points: Sequence[LatLon]) -> float:
    return sum(distance_km(a, b) for a, b in itertools.pairwise(points))


def optimal_order(start: LatLon, stops: Sequence[LatLon]) -> tuple[list[int], float, float]:
    """Exact shortest open path from start through every stop (all permutations; the benchmark keeps sets small).

    Returns (order of stop indices, its length in km, the second-best length in km: the margin that makes the
    answer unique)."""
    if len(stops) > 8:
        raise ValueError("exact search is for at most 8 stops")
    best: list[tuple[float, tuple[int, ...]]] = []
    for perm in itertools.permutations(range(len(stops))):
        length = path_length_km([start, *(stops[i] for i in perm)])
        best.append((length, perm))
    best.sort()
    second = best[1][0] if len(best) > 1 else math.inf
    return list(best[0][1]), best[0][0], second


def hamming(pred: Sequence[str], truth: Sequence[str]) -> int:
    """Positions of the truth that the prediction does not hold (a missing position counts as misplaced)."""
    return sum(1 for i, t in enumerate(truth) if i >= len(pred) or pred[i] != t)


# ---- a small road network ----------------------------------------------------------------------------------------


def shortest_path(n_nodes: int, edges: Sequence[tuple[int, int, float]], s: int, t: int) -> tuple[list[int], float]:
    """Dijkstra over an undirected edge list; returns (edge indices in order, length). Raises if unreachable."""
    import heapq

    adj: dict[int, list[tuple[int, int, float]]] = {}
    for i, (u, v, w) in enumerate(edges):
        adj.setdefault(u, []).append((v, i, w))
        adj.setdefault(v, []).append((u, i, w))
    dist = {s: 0.0}
    prev: dict[int, tuple[int, int]] = {}
    heap = [(0.0, s)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist.get(u, math.inf):
            continue
        if u == t:
            break
        for v, i, w in sorted(adj.get(u, [])):
            nd = d + w
            if nd < dist.get(v, math.inf):
                dist[v], prev[v] = nd, (u, i)
                heapq.heappush(heap, (nd, v))
    if t not in dist:
        raise ValueError("no path")
    out = []
    node = t
    while node != s:
        node, i = prev[node]
        out.append(i)
    return out[::-1], dist[t]


def simple_path_lengths(edges: Sequence[tuple[int, int, float]], s: int, t: int, cap: int = 10_000) -> list[float]:
    """Lengths of every simple s-t path (sorted) in a small undirected network: proves a shortest path unique."""
    adj: dict[int, list[tuple[int, float]]] = {}
    for u, v, w in edges:
        adj.setdefault(u, []).append((v, w))
        adj.setdefault(v, []).append((u, w))
    out: list[float] = []

    def walk(u: int, seen: set[int], d: float) -> None:
        if len(out) >= cap:
            return
        if u == t:
            out.append(d)
            return
        for v, w in adj.get(u, []):
            if v not in seen:
                seen.add(v)
                walk(v, seen, d + w)
                seen.discard(v)

    walk(s, {s}, 0.0)
    return sorted(out)


def turn_word(bearing_in: float, bearing_out: float) -> str:
    """Turn instruction between two headings (right positive), in the words turn-by-turn directions use."""
    turn = (bearing_out - bearing_in + 540.0) % 360.0 - 180.0
    a = abs(turn)
    side = "right" if turn > 0 else "left"
    if a < 20:
        return "continue straight"
    if a < 60:
        return f"bear {side}"
    if a < 150:
        return f"turn {side}"
    return "make a U-turn"
