"""Knowledge Module: the 20 multiple-choice templates of the paper's Table 2, generated from a map pack.

Each template draws its facts from the pack and its distractors with the strategy the paper's Table 6 assigns
(spatial proximity, semantic similarity, numerical variation within appendix A.1.3's bounds, attribute
substitution). ``verify`` recomputes, from the pack and independently of the generator's choices, which options are
true; a question is kept only when exactly one is, and the tests re-run it on every generated question.

A long module on purpose: it is a table of the 20 templates, each one `Template` record with its generator and its
verifier side by side (a reader checks one template against the paper's Table 2 and Table 6 in one place); split
across files, a template's two halves would drift apart. `tests/test_lint.py` lists it as the one module allowed
past 500 lines.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rig.benchmarks.urbangeo.geometry import distance_km
from rig.benchmarks.urbangeo.world import LANDUSE_TYPES, Aoi, City, Poi, humanise
from rig.maps.geo import haversine_m
from rig.maps.text import normalise_name

LETTERS = "ABCDE"

# Numerical bounds of appendix A.1.3 and the spatial radii of A.1.1.
COORD_DELTA = 0.01  # Retrieve_Coordinates: (lat +- d, lon +- d), about 1 km
DIST_RANGE_KM = (0.5, 25.0)  # Calculate_Distance distractors are drawn from this range ...
DIST_GAP_KM = (0.8, 8.0)  # ... with 0.8 < |d - d*| <= 8 km
LENGTH_FLOOR_M = 100.0  # Query_Length: {max(0.1 L, 100), 2 L, 3 L}
NEAR_ADDRESS_M = 500.0  # Retrieve_POI_Address: addresses of POIs within 500 m
FAR_RING_M = (500.0, 1000.0)  # Infer_POI_From_Scene, Find_Nearest_POI: distractors 500-1000 m away, corner regions
SCENE_M = 150.0  # the neighbourhood a scene describes (ours)
ZONE_RADIUS_M = 250.0  # a road's "area" when no AOI polygon fits: a circle around a landmark (ours)
MAX_ATTEMPTS = 1000  # per question, as appendix A.1.3's comparative sampling

DIMENSIONS = ("Node", "Area", "Road", "Type", "Function", "Surroundings")


@dataclass
class Mcq:
    template: str
    question: str
    options: list[str]
    answer: int  # index of the correct option
    facts: dict[str, Any] = field(default_factory=dict)  # what verify() needs to recompute the truth

    @property
    def letter(self) -> str:
        return LETTERS[self.answer]

    @property
    def dimension(self) -> str:
        return TEMPLATES[self.template].dimension


OptionTest = Callable[[str], bool]  # is this option true?
AoiMetric = Callable[[City, Aoi], float]


class Skip(Exception):
    """This draw cannot make a clean question; the generator draws again."""


def _norm(s: str) -> str:
    return normalise_name(s)


def _shuffle(
    rng: random.Random, template: str, question: str, correct: str, distractors: list[str], facts: dict[str, Any]
) -> Mcq:
    opts = [correct, *distractors]
    if len({_norm(o) for o in opts}) != len(opts):
        raise Skip("options are not unique")
    order = list(range(len(opts)))
    rng.shuffle(order)
    return Mcq(template, question, [opts[i] for i in order], order.index(0), facts)


def _sample(rng: random.Random, pool: list, k: int) -> list:
    if len(pool) < k:
        raise Skip(f"only {len(pool)} candidates for {k} distractors")
    return rng.sample(pool, k)


def _distinct(values: list[str], exclude: set[str]) -> list[str]:
    """Values in order, each normalised form once, none in ``exclude`` (normalised)."""
    seen, out = set(exclude), []
    for v in values:
        n = _norm(v)
        if n not in seen:
            seen.add(n)
            out.append(v)
    return out


def _named(a: Aoi) -> str:
    assert a.name is not None  # only City.named_aois reach here
    return a.name


def fmt_km(d: float) -> str:
    return f"{d:.2f} km"


def fmt_m(d: float) -> str:
    return f"{d:.0f} m"


def fmt_ll(lat: float, lon: float) -> str:
    return f"({lat:.4f}, {lon:.4f})"


def parse_number(text: str) -> float:
    m = re.search(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    if not m:
        raise ValueError(f"no number in {text!r}")
    return float(m.group())


def parse_ll(text: str) -> tuple[float, float]:
    a, b = (float(x) for x in re.findall(r"-?\d+\.\d+", text)[:2])
    return a, b


# ---- pools -------------------------------------------------------------------------------------------------------


def _pois_named(city: City, name: str) -> list[Poi]:
    return city.pois_by_name.get(_norm(name), [])


def _poi_of_label(city: City, label: str) -> list[Poi]:
    """Options print "Name (category)"; the name is everything before the last " (" ."""
    name = label[: label.rfind(" (")] if label.endswith(")") and " (" in label else label
    return _pois_named(city, name)


def _aois_named(city: City, name: str) -> list[Aoi]:
    return [a for a in city.named_aois if _norm(a.name or "") == _norm(name)]


def _unique_pois(city: City) -> list[Poi]:
    return [p for p in city.pois if city.unique_name(p)]


def _poi_label(p: Poi) -> str:
    return f"{p.name} ({humanise(p.category).lower()})"


def _quadrant(a: Poi, b: Poi) -> str:
    """Corner region of b seen from a (appendix A.1.1's four corner regions)."""
    return ("N" if b.lat >= a.lat else "S") + ("E" if b.lon >= a.lon else "W")


def _far_corner_pois(city: City, rng: random.Random, at: Poi, k: int, exclude: set[str]) -> list[Poi]:
    d = city.distances_m(at.lat, at.lon)
    ring = [
        p
        for p, x in zip(city.pois, d, strict=True)
        if FAR_RING_M[0] <= x <= FAR_RING_M[1] and city.unique_name(p) and _norm(p.name) not in exclude
    ]
    by_q: dict[str, list[Poi]] = {}
    for p in ring:
        by_q.setdefault(_quadrant(at, p), []).append(p)
    quads = sorted(by_q)
    rng.shuffle(quads)
    out = [rng.choice(by_q[q]) for q in quads[:k]]
    rest = [p for p in ring if p not in out]  # fewer than k corners populated: fill from any corner
    out += _sample(rng, rest, k - len(out)) if len(out) < k else []
    return out


# ---- zones: the "area" a road question is asked about ----------------------------------------------------------


def zone_contains(city: City, zone: dict[str, Any], lat: float, lon: float) -> bool:
    if "aoi" in zone:
        import shapely

        return bool(shapely.contains_xy(city.aoi_by_key[zone["aoi"]].geom, lon, lat))
    clat, clon, r = zone["circle"]
    return haversine_m(clat, clon, lat, lon) <= r


def _zones(city: City, rng: random.Random) -> dict[str, Any]:
    """A named AOI of some size, or a circle around a uniquely named landmark."""
    big = [a for a in city.named_aois if a.area_m2 >= 5000 and city.unique_name_aoi(a)]
    if big and rng.random() < 0.5:
        a = rng.choice(big)
        return {"aoi": a.key, "label": f"the area {a.name}"}
    p = rng.choice(_unique_pois(city))
    return {
        "circle": [round(p.lat, 6), round(p.lon, 6), ZONE_RADIUS_M],
        "label": f"the area within {ZONE_RADIUS_M:.0f} m of {p.name}",
    }


def junctions_in_zone(city: City, road: str, zone: dict[str, Any]) -> list[tuple[float, str]]:
    """(position along the road, cross street) of every junction of ``road`` inside the zone, in road order."""
    r = city.roads_by_name[road]
    out = []
    for other, nodes in sorted(city.road_links[road].items()):
        for n in nodes:
            lat, lon = city.node_ll(n)
            if zone_contains(city, zone, lat, lon):
                out.append((city.chain_position(r, lat, lon), other))
    return sorted(out)


def end_junctions(city: City, road: str, zone: dict[str, Any]) -> frozenset[str] | None:
    js = junctions_in_zone(city, road, zone)
    if len(js) < 2:
        return None
    first, last = js[0][1], js[-1][1]
    # The end cross streets must be unambiguous: each meets the road at one end only.
    if first == last or any(name in (first, last) for _, name in js[1:-1]):
        return None
    if js[1][0] - js[0][0] < 1.0 or js[-1][0] - js[-2][0] < 1.0:
        return None  # two junctions at the same place: which comes first is a matter of mapping
    return frozenset((first, last))


# ---- the templates ----------------------------------------------------------------------------------------------


def g_retrieve_poi_address(city: City, rng: random.Random) -> Mcq:
    p = rng.choice([p for p in _unique_pois(city) if p.tagged_address and p.address and re.search(r"\d", p.address)])
    d = city.distances_m(p.lat, p.lon)
    near = [
        q.address
        for q, x in zip(city.pois, d, strict=True)
        if x <= NEAR_ADDRESS_M and q.tagged_address and q.address and q.name != p.name
    ]
    pool = _distinct(sorted(near), {p.address})  # type: ignore[arg-type]
    return _shuffle(
        rng,
        "Retrieve_POI_Address",
        f"In {city.name}, what is the address of {_poi_label(p)}?",
        p.address,  # type: ignore[arg-type]
        _sample(rng, pool, 3),
        {"poi": p.name},
    )


def v_retrieve_poi_address(city: City, q: Mcq) -> OptionTest:
    addrs = {_norm(p.address or "") for p in _pois_named(city, q.facts["poi"])}
    return lambda o: _norm(o) in addrs


def g_retrieve_poi_name(city: City, rng: random.Random) -> Mcq:
    by_addr: dict[str, list[Poi]] = {}
    for q in city.pois:
        if q.tagged_address and q.address:
            by_addr.setdefault(_norm(q.address), []).append(q)
    p = rng.choice(
        [
            q
            for q in _unique_pois(city)
            if q.tagged_address and q.address and re.search(r"\d", q.address) and len(by_addr[_norm(q.address)]) == 1
        ]
    )
    pool = _distinct(sorted({q.name for q in city.pois}), {p.name})
    return _shuffle(
        rng,
        "Retrieve_POI_Name",
        f"In {city.name}, which place is located at {p.address}?",
        p.name,
        _sample(rng, pool, 3),
        {"address": p.address},
    )


def v_retrieve_poi_name(city: City, q: Mcq) -> OptionTest:
    names = {_norm(p.name) for p in city.pois if p.address and _norm(p.address) == _norm(q.facts["address"])}
    return lambda o: _norm(o) in names


def g_retrieve_coordinates(city: City, rng: random.Random) -> Mcq:
    p = rng.choice(_unique_pois(city))
    lat, lon = round(p.lat, 4), round(p.lon, 4)
    dists = [fmt_ll(lat + sa * COORD_DELTA, lon + so * COORD_DELTA) for sa in (1, -1) for so in (1, -1)]
    return _shuffle(
        rng,
        "Retrieve_Coordinates",
        f"In {city.name}, what are the coordinates (latitude, longitude) of {_poi_label(p)}?",
        fmt_ll(lat, lon),
        dists,
        {"poi": p.name},
    )


def v_retrieve_coordinates(city: City, q: Mcq) -> OptionTest:
    ps = _pois_named(city, q.facts["poi"])
    return lambda o: any(abs(parse_ll(o)[0] - p.lat) <= 6e-5 and abs(parse_ll(o)[1] - p.lon) <= 6e-5 for p in ps)


def distance_distractors(rng: random.Random, d_true: float, k: int = 3) -> list[float]:
    """k values uniform on [0.5, 25] km with 0.8 < |d - d*| <= 8 km, distinct at the printed precision."""
    lo, hi = DIST_RANGE_KM
    g0, g1 = DIST_GAP_KM
    spans = [(max(lo, d_true - g1), d_true - g0), (d_true + g0, min(hi, d_true + g1))]
    spans = [(a, b) for a, b in spans if b > a]
    if not spans:
        raise Skip("no room for distance distractors")
    out: list[float] = []
    for _ in range(200):
        if len(out) == k:
            break
        a, b = rng.choices(spans, weights=[b - a for a, b in spans])[0]
        v = round(rng.uniform(a, b), 2)
        if lo <= v <= hi and g0 < abs(v - round(d_true, 2)) <= g1 and fmt_km(v) not in map(fmt_km, out):
            out.append(v)
    if len(out) < k:
        raise Skip("could not draw distinct distance distractors")
    return out


def _two_pois(city: City, rng: random.Random) -> tuple[Poi, Poi, float]:
    a, b = _sample(rng, _unique_pois(city), 2)
    d = distance_km(a.ll, b.ll)
    if d < 0.2:
        raise Skip("too close for a distance question")
    return a, b, d


def g_calculate_distance(city: City, rng: random.Random) -> Mcq:
    a, b, d = _two_pois(city, rng)
    return _shuffle(
        rng,
        "Calculate_Distance",
        f"In {city.name}, what is the straight-line (great-circle) distance between {a.name} and {b.name}?",
        fmt_km(d),
        [fmt_km(x) for x in distance_distractors(rng, d)],
        {"a": a.name, "b": b.name},
    )


def v_calculate_distance(city: City, q: Mcq) -> OptionTest:
    """Both distance templates: the great-circle distance between the two named places, at the printed precision."""
    a, b = _pois_named(city, q.facts["a"]), _pois_named(city, q.facts["b"])
    ds = [distance_km(x.ll, y.ll) for x in a for y in b]
    return lambda o: any(abs(parse_number(o) - d) <= 0.0051 for d in ds)


def _surroundings(city: City, p: Poi, k: int = 2) -> list[Poi]:
    d = city.distances_m(p.lat, p.lon)
    order = sorted(range(len(city.pois)), key=lambda i: (d[i], i))
    out: list[Poi] = []
    for i in order:
        q = city.pois[i]
        if _norm(q.name) != _norm(p.name) and d[i] <= SCENE_M and _norm(q.name) not in {_norm(x.name) for x in out}:
            out.append(q)
        if len(out) == k:
            break
    return out


def g_calculate_distance_context(city: City, rng: random.Random) -> Mcq:
    a, b, d = _two_pois(city, rng)
    hints = []
    for p in (a, b):
        near = _surroundings(city, p)
        facts = ([f"at {p.address}"] if p.address else []) + (
            [f"next to {' and '.join(q.name for q in near)}"] if near else []
        )
        if facts:
            hints.append(f"{_poi_label(p)} is {', '.join(facts)}.")
    if not hints:
        raise Skip("nothing to hint with")
    return _shuffle(
        rng,
        "Calculate_Distance_Context",
        f"In {city.name}, what is the straight-line (great-circle) distance between {a.name} and "
        f"{b.name}? Hint: {' '.join(hints)}",
        fmt_km(d),
        [fmt_km(x) for x in distance_distractors(rng, d)],
        {"a": a.name, "b": b.name},
    )


def g_retrieve_aoi_address(city: City, rng: random.Random) -> Mcq:
    a = rng.choice([x for x in city.named_aois if city.aoi_addresses.get(x.key) and city.unique_name_aoi(x)])
    own = set(city.aoi_addresses[a.key])
    pool = _distinct(sorted({ad for k, ads in city.aoi_addresses.items() if k != a.key for ad in ads}), own)
    return _shuffle(
        rng,
        "Retrieve_AOI_Address",
        f"In {city.name}, what is the address of the area {a.name}?",
        city.aoi_addresses[a.key][0],
        _sample(rng, pool, 3),
        {"aoi": a.key},
    )


def v_retrieve_aoi_address(city: City, q: Mcq) -> OptionTest:
    addrs = {_norm(x) for x in city.aoi_addresses.get(q.facts["aoi"], [])}
    return lambda o: _norm(o) in addrs


def g_retrieve_aoi_name(city: City, rng: random.Random) -> Mcq:
    owners: dict[str, list[str]] = {}
    for k, ads in city.aoi_addresses.items():
        for ad in ads:
            owners.setdefault(_norm(ad), []).append(k)
    cands = [
        (x, ad) for x in city.named_aois for ad in city.aoi_addresses.get(x.key, []) if len(owners[_norm(ad)]) == 1
    ]
    a, address = rng.choice(cands)
    pool = _distinct(sorted({_named(x) for x in city.named_aois if x.key != a.key}), {_named(a)})
    return _shuffle(
        rng,
        "Retrieve_AOI_Name",
        f"In {city.name}, which area is at {address}?",
        _named(a),
        _sample(rng, pool, 3),
        {"address": address},
    )


def v_retrieve_aoi_name(city: City, q: Mcq) -> OptionTest:
    keys = {k for k, ads in city.aoi_addresses.items() if _norm(q.facts["address"]) in {_norm(x) for x in ads}}
    return lambda o: _norm(o) in keys


def _aois_by_distance(city: City, lat: float, lon: float) -> list[Aoi]:
    from shapely.geometry import Point

    pt = Point(lon, lat)
    return sorted(city.named_aois, key=lambda a: (a.geom.distance(pt), a.key))


def g_find_cover_aoi(city: City, rng: random.Random) -> Mcq:
    p = rng.choice([q for q in _unique_pois(city) if city.aois_containing(q.lat, q.lon)])
    inside = city.aois_containing(p.lat, p.lon)
    correct = min(inside, key=lambda a: (a.area_m2, a.key))
    outside = [a for a in _aois_by_distance(city, p.lat, p.lon) if a not in inside and city.unique_name_aoi(a)][:8]
    return _shuffle(
        rng,
        "Find_Cover_AOI",
        f"In {city.name}, which area contains {_poi_label(p)}?",
        correct.name,  # type: ignore[arg-type]
        [a.name for a in _sample(rng, outside, 3)],
        {"pois": [p.name]},
    )


def g_find_cover_aoi_all(city: City, rng: random.Random) -> Mcq:
    a = rng.choice([x for x in city.named_aois if sum(city.unique_name(q) for q in city.pois_in(x)) >= 2])
    members = [q for q in city.pois_in(a) if city.unique_name(q)]
    ps = _sample(rng, members, min(len(members), rng.choice((2, 3))))
    covering = [x for x in city.named_aois if all(x in city.aois_containing(q.lat, q.lon) for q in ps)]
    correct = min(covering, key=lambda x: (x.area_m2, x.key))
    others = [x for x in _aois_by_distance(city, a.lat, a.lon) if x not in covering and city.unique_name_aoi(x)][:8]
    names = ", ".join(q.name for q in ps)
    return _shuffle(
        rng,
        "Find_Cover_AOI_All",
        f"In {city.name}, which is the smallest area that contains all of these places: {names}?",
        _named(correct),
        [x.name for x in _sample(rng, others, 3)],
        {"pois": [q.name for q in ps]},
    )


def v_find_cover_aoi(city: City, q: Mcq) -> OptionTest:
    """Both cover templates: the smallest listed area that contains every named place."""
    pts = [p for n in q.facts["pois"] for p in _pois_named(city, n)]
    covering = [a for a in city.named_aois if all(a in city.aois_containing(p.lat, p.lon) for p in pts)]
    opts = [a for o in q.options for a in _aois_named(city, o)]
    in_opts = [a for a in covering if a in opts]
    smallest = min(in_opts, key=lambda a: a.area_m2) if in_opts else None
    return lambda o: smallest is not None and _norm(o) == _norm(smallest.name or "")


def length_distractors(length_m: float) -> list[float]:
    return [max(0.1 * length_m, LENGTH_FLOOR_M), 2 * length_m, 3 * length_m]


def g_query_length(city: City, rng: random.Random) -> Mcq:
    r = rng.choice([x for x in city.roads if x.length_m >= 200])
    return _shuffle(
        rng,
        "Query_Length",
        f"In {city.name}, what is the total mapped length of {r.name} (all of its ways together)?",
        fmt_m(r.length_m),
        [fmt_m(x) for x in length_distractors(r.length_m)],
        {"road": r.name},
    )


def v_query_length(city: City, q: Mcq) -> OptionTest:
    length = city.roads_by_name[q.facts["road"]].length_m
    return lambda o: abs(parse_number(o) - length) <= 0.5


def _pair(a: str, b: str) -> str:
    x, y = sorted((a, b))
    return f"{x} and {y}"


def g_find_junctions(city: City, rng: random.Random) -> Mcq:
    zone = _zones(city, rng)
    roads = [r.name for r in city.roads if end_junctions(city, r.name, zone)]
    if not roads:
        raise Skip("no road with two clear end junctions in this zone")
    road = rng.choice(roads)
    first, last = sorted(end_junctions(city, road, zone))  # type: ignore[arg-type]
    fakes = _sample(rng, [r.name for r in city.roads if r.name != road and r.name not in city.road_links[road]], 4)
    dists = [_pair(first, fakes[0]), _pair(fakes[1], last), _pair(fakes[2], fakes[3])]
    return _shuffle(
        rng,
        "Find_Junctions",
        f"In {city.name}, {road} runs through {zone['label']}. Which two cross streets mark its first "
        "and last junctions inside that area?",
        _pair(first, last),
        dists,
        {"road": road, "zone": zone},
    )


def v_find_junctions(city: City, q: Mcq) -> OptionTest:
    ends = end_junctions(city, q.facts["road"], q.facts["zone"])
    return lambda o: ends is not None and frozenset(o.split(" and ")) == ends


def connections_in_zone(city: City, road: str, zone: dict[str, Any]) -> set[str]:
    return {
        o
        for o, nodes in city.road_links[road].items()
        if any(zone_contains(city, zone, *city.node_ll(n)) for n in nodes)
    }


def g_identify_connections(city: City, rng: random.Random) -> Mcq:
    zone = _zones(city, rng)
    roads = [r.name for r in city.roads if connections_in_zone(city, r.name, zone)]
    if not roads:
        raise Skip("no road meets another inside this zone")
    road = rng.choice(roads)
    conn = sorted(connections_in_zone(city, road, zone))
    correct = rng.choice(conn)
    # Distractors: streets near the zone that never meet the target road.
    r0 = city.roads_by_name[road]
    mid = r0.polyline[len(r0.polyline) // 2]
    unlinked = [r for r in city.roads if r.name != road and r.name not in city.road_links[road]]
    unlinked.sort(key=lambda r: (min(haversine_m(mid[0], mid[1], p[0], p[1]) for p in r.polyline), r.name))
    return _shuffle(
        rng,
        "Identify_Connections",
        f"In {city.name}, which of these streets meets {road} inside {zone['label']}?",
        correct,
        [r.name for r in _sample(rng, unlinked[:10], 3)],
        {"road": road, "zone": zone},
    )


def v_identify_connections(city: City, q: Mcq) -> OptionTest:
    conn = connections_in_zone(city, q.facts["road"], q.facts["zone"])
    return lambda o: o in conn


def g_classify_poi(city: City, rng: random.Random) -> Mcq:
    p = rng.choice(_unique_pois(city))
    same_key = sorted({q.category for q in city.pois if q.category_key == p.category_key and q.category != p.category})
    pool = [humanise(c) for c in same_key]
    if len(pool) < 3:  # too few similar categories under this key: top up from the others
        other = sorted({q.category for q in city.pois} - set(same_key) - {p.category})
        pool += [humanise(c) for c in rng.sample(other, 3 - len(pool))]
    return _shuffle(
        rng,
        "Classify_POI",
        f"In {city.name}, what kind of place is {p.name}?",
        humanise(p.category),
        _sample(rng, _distinct(pool, {humanise(p.category)}), 3),
        {"poi": p.name},
    )


def v_classify_poi(city: City, q: Mcq) -> OptionTest:
    cats = {humanise(p.category) for p in _pois_named(city, q.facts["poi"])}
    return lambda o: o in cats


def g_landuse_aoi(city: City, rng: random.Random) -> Mcq:
    a = rng.choice([x for x in city.named_aois if x.landuse and city.unique_name_aoi(x)])
    pool = [t for t in LANDUSE_TYPES if t != a.landuse]
    return _shuffle(
        rng,
        "Landuse_AOI",
        f"In {city.name}, what is the land use of the area {a.name}?",
        a.landuse,  # type: ignore[arg-type]
        _sample(rng, pool, 3),
        {"aoi": a.key},
    )


def v_landuse_aoi(city: City, q: Mcq) -> OptionTest:
    return lambda o: o == city.aoi_by_key[q.facts["aoi"]].landuse


def g_find_instances_by_type(city: City, rng: random.Random) -> Mcq:
    uniq = _unique_pois(city)
    cat = rng.choice(sorted({p.category for p in uniq}))
    key = next(p.category_key for p in uniq if p.category == cat)
    correct = rng.choice([p for p in uniq if p.category == cat])
    similar = [p for p in uniq if p.category_key == key and p.category != cat]
    if len({p.category for p in similar}) < 2:
        raise Skip("too few similar categories")
    return _shuffle(
        rng,
        "Find_Instances_By_Type",
        f"In {city.name}, which of these places is a {humanise(cat).lower()}?",
        correct.name,
        [p.name for p in _sample(rng, similar, 3)],
        {"category": cat},
    )


def v_find_instances_by_type(city: City, q: Mcq) -> OptionTest:
    return lambda o: any(p.category == q.facts["category"] for p in _pois_named(city, o))


def _compare(template: str, phrase: str, metric: AoiMetric) -> Callable[[City, random.Random], Mcq]:
    def gen(city: City, rng: random.Random) -> Mcq:
        pool = [a for a in city.named_aois if city.unique_name_aoi(a)]
        for _ in range(MAX_ATTEMPTS):  # appendix A.1.3: resample until four unique names and one strict maximum
            four = _sample(rng, pool, 4)
            vals = [metric(city, a) for a in four]
            top = max(vals)
            if vals.count(top) == 1 and top > 0:
                best = four[vals.index(top)]
                rest = [a.name for a in four if a is not best]
                return _shuffle(
                    rng,
                    template,
                    f"In {city.name}, which of these areas {phrase}?",
                    best.name,
                    rest,
                    {"aois": [a.key for a in four]},
                )
        raise Skip("no draw without a tie")

    return gen


def _compare_verify(metric: AoiMetric) -> Callable[[City, Mcq], OptionTest]:
    def check(city: City, q: Mcq) -> OptionTest:
        vals = {_norm(city.aoi_by_key[k].name or ""): metric(city, city.aoi_by_key[k]) for k in q.facts["aois"]}
        top = max(vals.values())
        winners = {k for k, v in vals.items() if v == top}
        return lambda o: len(winners) == 1 and _norm(o) in winners

    return check


def _poi_count(city: City, a: Aoi) -> float:
    return float(len(city.pois_in(a)))


def _area(city: City, a: Aoi) -> float:
    return a.area_m2


def _type_diversity(city: City, a: Aoi) -> float:
    return float(len({p.category for p in city.pois_in(a)}))


def g_infer_poi_from_scene(city: City, rng: random.Random) -> Mcq:
    t = rng.choice(_unique_pois(city))
    near = _surroundings(city, t, 3)
    if len(near) < 2:
        raise Skip("too little around this place to describe a scene")
    street = city.pack.reverse_geocode(t.lat, t.lon).street
    where = f"You are standing on {street}. " if street else ""
    scene = where + "Around you: " + "; ".join(_poi_label(q) for q in near) + "."
    exclude = {_norm(q.name) for q in near} | {_norm(t.name)}
    dists = _far_corner_pois(city, rng, t, 3, exclude)
    return _shuffle(
        rng,
        "Infer_POI_From_Scene",
        f"In {city.name}: {scene} Which of these places is most likely also right here?",
        _poi_label(t),
        [_poi_label(p) for p in dists],
        {"centre": [t.lat, t.lon], "scene": [q.name for q in near]},
    )


def v_infer_poi_from_scene(city: City, q: Mcq) -> OptionTest:
    clat, clon = q.facts["centre"]
    return lambda o: any(haversine_m(clat, clon, p.lat, p.lon) <= SCENE_M for p in _poi_of_label(city, o))


def g_find_nearest_poi(city: City, rng: random.Random) -> Mcq:
    q = rng.choice(_unique_pois(city))
    d = city.distances_m(q.lat, q.lon)
    order = sorted((x, i) for i, x in enumerate(d) if _norm(city.pois[i].name) != _norm(q.name))
    nearest = city.pois[order[0][1]]
    if not city.unique_name(nearest) or (len(order) > 1 and order[1][0] - order[0][0] < 5.0):
        raise Skip("no single clearly nearest place")
    dists = _far_corner_pois(city, rng, q, 3, {_norm(q.name), _norm(nearest.name)})
    return _shuffle(
        rng,
        "Find_Nearest_POI",
        f"In {city.name}, which place is nearest to {_poi_label(q)}?",
        nearest.name,
        [p.name for p in dists],
        {"poi": q.name},
    )


def v_find_nearest_poi(city: City, q: Mcq) -> OptionTest:
    qs = _pois_named(city, q.facts["poi"])
    others = [p for p in city.pois if _norm(p.name) != _norm(q.facts["poi"])]
    best = min(haversine_m(a.lat, a.lon, p.lat, p.lon) for a in qs for p in others)
    return lambda o: any(
        abs(haversine_m(a.lat, a.lon, p.lat, p.lon) - best) < 1e-6 for a in qs for p in _pois_named(city, o)
    )


# ---- the table of templates ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """One knowledge template: its dimension (Table 2) and distractor strategy (Table 6), how a question is drawn,
    and how each option's truth is recomputed from the pack, independently of the draw."""

    dimension: str
    strategy: str
    generate: Callable[[City, random.Random], Mcq]
    verify: Callable[[City, Mcq], OptionTest]


TEMPLATES: dict[str, Template] = {
    "Retrieve_POI_Address": Template("Node", "spatial", g_retrieve_poi_address, v_retrieve_poi_address),
    "Retrieve_POI_Name": Template("Node", "semantic", g_retrieve_poi_name, v_retrieve_poi_name),
    "Retrieve_Coordinates": Template("Node", "spatial", g_retrieve_coordinates, v_retrieve_coordinates),
    "Calculate_Distance": Template("Node", "numerical", g_calculate_distance, v_calculate_distance),
    "Calculate_Distance_Context": Template("Node", "numerical", g_calculate_distance_context, v_calculate_distance),
    "Retrieve_AOI_Address": Template("Area", "semantic", g_retrieve_aoi_address, v_retrieve_aoi_address),
    "Retrieve_AOI_Name": Template("Area", "semantic", g_retrieve_aoi_name, v_retrieve_aoi_name),
    "Find_Cover_AOI": Template("Area", "semantic", g_find_cover_aoi, v_find_cover_aoi),
    "Find_Cover_AOI_All": Template("Area", "semantic", g_find_cover_aoi_all, v_find_cover_aoi),
    "Query_Length": Template("Road", "numerical", g_query_length, v_query_length),
    "Find_Junctions": Template("Road", "attribute", g_find_junctions, v_find_junctions),
    "Identify_Connections": Template("Road", "attribute", g_identify_connections, v_identify_connections),
    "Classify_POI": Template("Type", "semantic", g_classify_poi, v_classify_poi),
    "Landuse_AOI": Template("Type", "semantic", g_landuse_aoi, v_landuse_aoi),
    "Find_Instances_By_Type": Template("Type", "semantic", g_find_instances_by_type, v_find_instances_by_type),
    "Compare_POI_Count": Template(
        "Function",
        "numerical",
        _compare("Compare_POI_Count", "contains the most places (points of interest)", _poi_count),
        _compare_verify(_poi_count),
    ),
    "Compare_Area_Size": Template(
        "Function", "numerical", _compare("Compare_Area_Size", "is the largest by area", _area), _compare_verify(_area)
    ),
    "Compare_Type_Diversity": Template(
        "Function",
        "numerical",
        _compare(
            "Compare_Type_Diversity",
            "has the most different kinds of places (distinct POI categories)",
            _type_diversity,
        ),
        _compare_verify(_type_diversity),
    ),
    "Infer_POI_From_Scene": Template("Surroundings", "spatial", g_infer_poi_from_scene, v_infer_poi_from_scene),
    "Find_Nearest_POI": Template("Surroundings", "spatial", g_find_nearest_poi, v_find_nearest_poi),
}


def verify(city: City, q: Mcq) -> list[int]:
    """Indices of the options that are true for this question on this pack."""
    truth = TEMPLATES[q.template].verify(city, q)
    return [i for i, o in enumerate(q.options) if truth(o)]


# ---- generation ---------------------------------------------------------------------------------------------------


def generate(city: City, template: str, n: int, seed: int) -> list[Mcq]:
    """Up to n questions of one template; deterministic for (pack, template, n, seed). A question is kept only when
    verify() finds exactly its one answer true. Fewer than n when the pack cannot give more distinct ones."""
    rng = random.Random(f"urbangeo-knowledge:{seed}:{city.source_sha256}:{template}")
    gen = TEMPLATES[template].generate
    out: list[Mcq] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for _ in range(max(50, 40 * n)):
        if len(out) >= n:
            break
        try:
            q = gen(city, rng)
        except (Skip, IndexError, ValueError, KeyError):
            continue  # IndexError: rng.choice on an empty pool for this pack
        key = (q.question, tuple(sorted(q.options)))
        if key in seen or verify(city, q) != [q.answer]:
            continue
        seen.add(key)
        out.append(q)
    return out
