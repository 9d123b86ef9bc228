"""Reasoning Module: the 7 open-ended tasks, with every fact the answer needs in the prompt and the ground truth
computed by code from exactly the (rounded) coordinates the prompt shows.

The paper's reasoning problems were written by annotators; its data is not public, so the rig builds comparable
problems from a map pack: POIs with coordinates, roads as sampled polylines, AOIs as rings of 6-10 points
(paper sec. 3.2.1). Ambiguous draws (a relation within the tolerance band, a visiting order with a near tie, a
second route almost as short) are discarded, as the paper's quality control removed non-unique problems.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rig.benchmarks.urbangeo import geometry as G
from rig.benchmarks.urbangeo import hours as H
from rig.benchmarks.urbangeo.knowledge import Skip
from rig.benchmarks.urbangeo.network import Segment
from rig.benchmarks.urbangeo.prompts import DIGITS, ll, lls, poi_block, r5
from rig.benchmarks.urbangeo.world import Aoi, City, Poi, Road, humanise
from rig.maps.geo import haversine_m
from rig.maps.text import normalise_name

TASKS: dict[str, tuple[str, str]] = {  # code -> (name, tier); tiers carry the paper's point totals
    "DS": ("Distance", "foundational"),
    "DR": ("Direction", "foundational"),
    "RE": ("Relation", "foundational"),
    "PN": ("Planning", "advanced"),
    "PR": ("Prediction", "advanced"),
    "NV": ("Navigation", "advanced"),
    "RC": ("Recommendation", "advanced"),
}
RELATION_SUBTYPES = ("road-road", "road-area", "area-area")
RELATION_LABELS = {"road-road": G.ROAD_ROAD, "road-area": G.ROAD_AREA, "area-area": G.AREA_AREA}
FOOD = ("restaurant", "cafe", "fast_food", "pub", "bar")


@dataclass
class Problem:
    task: str
    subtype: str
    context: str  # the geospatial background block
    question: str
    truth: dict[str, Any]  # typed ground truth for the program scorers
    truth_text: str  # the reference answer the judge sees
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        return f"{self.context}\n\n{self.question}" if self.context else self.question


def _unique(city: City) -> list[Poi]:
    """Uniquely named POIs whose names read cleanly inside lists and "A->B" answers."""
    return [p for p in city.pois if city.unique_name(p) and not any(c in p.name for c in ",;>[]()")]


# ---- foundational -----------------------------------------------------------------------------------------------


def t_distance(city: City, rng: random.Random) -> Problem:
    a, b = rng.sample(_unique(city), 2)
    pa, pb = r5(a.ll), r5(b.ll)
    d = G.distance_km(pa, pb)
    if d < 0.1:
        raise Skip("too close")
    return Problem(
        "DS",
        "",
        f"Places in {city.name}:\n1. {poi_block(a)}\n2. {poi_block(b)}",
        f"What is the great-circle (straight-line) distance in kilometres between {a.name} and {b.name}?",
        {"km": d},
        f"{d:.3f} km",
        {"a": a.name, "b": b.name, "pa": pa, "pb": pb},
    )


def t_direction(city: City, rng: random.Random) -> Problem:
    a, b = rng.sample(_unique(city), 2)
    pa, pb = r5(a.ll), r5(b.ll)
    if G.distance_km(pa, pb) < 0.1:
        raise Skip("too close")
    brg = G.bearing(pa, pb)
    if min(abs((brg - 22.5) % 45.0), 45.0 - ((brg - 22.5) % 45.0)) < 3.0:
        raise Skip("bearing on a sector boundary: the cardinal direction would be a coin toss")
    card = G.cardinal8(brg)
    return Problem(
        "DR",
        "",
        f"Points of interest in {city.name}:\n1. {poi_block(a)}\n2. {poi_block(b)}",
        f"What is the bearing from {a.name} (point 1) to {b.name} (point 2), in degrees clockwise from "
        "true north, and which of the eight compass directions (North, Northeast, East, Southeast, South, "
        "Southwest, West, Northwest) is it?",
        {"bearing": brg, "cardinal": card},
        f"Bearing: {brg:.2f} degrees, Cardinal direction: {card}",
        {"a": a.name, "b": b.name, "pa": pa, "pb": pb},
    )


def _road_sample(road: Road, rng: random.Random) -> list[tuple[float, float]]:
    return G.round_pts(G.sample_polyline(road.polyline, rng.randint(5, 8)), DIGITS)


def _ring_sample(aoi: Aoi, rng: random.Random) -> list[tuple[float, float]]:
    return G.round_pts(G.sample_ring(aoi.outer_ring(), rng.randint(6, 10)), DIGITS)


def _aoi_label(a: Aoi, taken: set[str]) -> str:
    base = a.name or f"Unnamed {humanise(a.category).lower()} area"
    label, k = base, 2
    while label in taken:
        label, k = f"{base} ({k})", k + 1
    taken.add(label)
    return label


RELATION_QUESTIONS = {
    "road-road": (
        "Based on their coordinates, what is the spatial relationship between the two roads? Answer with "
        "one of: Intersecting (they cross each other), Parallel (they run alongside each other in the same "
        "general direction without crossing), or Disconnected (they neither cross nor run parallel). "
        f"Treat points closer than {G.TOUCH_M:.0f} m as meeting."
    ),
    "road-area": (
        "Based on their coordinates, what is the spatial relationship between the road and the area? "
        "Answer with one of: Pass through (part of the road lies well inside the area), Touch (the road "
        "reaches the area's boundary but does not go further inside), or Lie outside (the road stays away "
        f"from the area). Treat anything within {G.TOUCH_M:.0f} m of the boundary as on the boundary."
    ),
    "area-area": (
        "Based on their coordinates, what is the spatial relationship between the two areas? Answer with "
        "one of: Overlapping (they share common space), Adjacent (they share a boundary but do not "
        "overlap), or Separate (they neither overlap nor share a boundary). Treat boundaries closer than "
        f"{G.TOUCH_M:.0f} m as shared."
    ),
}


def _near_pairs(items: list, key, max_m: float) -> list[tuple[int, int]]:
    out = []
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            if haversine_m(*key(items[i]), *key(items[j])) <= max_m:
                out.append((i, j))
    return out


def t_relation(city: City, rng: random.Random, subtype: str | None = None) -> Problem:
    subtype = subtype or rng.choice(RELATION_SUBTYPES)
    target = rng.choice(RELATION_LABELS[subtype])
    roads = [r for r in city.roads if G.polyline_length_m(r.polyline) >= 100]
    areas = [a for a in city.aois if a.area_m2 >= 1500]

    def mid(r: Road) -> tuple[float, float]:
        return r.polyline[len(r.polyline) // 2]

    pairs: list[tuple[Road | Aoi, Road | Aoi]]
    if subtype == "road-road":
        pairs = [(roads[i], roads[j]) for i, j in _near_pairs(roads, mid, 800)]
    elif subtype == "road-area":
        pairs = [(r, a) for r in roads for a in areas if haversine_m(*mid(r), a.lat, a.lon) <= 600]
    else:
        pairs = [(areas[i], areas[j]) for i, j in _near_pairs(areas, lambda a: (a.lat, a.lon), 500)]
    rng.shuffle(pairs)
    for x, y in pairs[:400]:
        gx = _road_sample(x, rng) if isinstance(x, Road) else _ring_sample(x, rng)
        gy = _road_sample(y, rng) if isinstance(y, Road) else _ring_sample(y, rng)
        rel = {"road-road": G.road_road_relation, "road-area": G.road_area_relation, "area-area": G.area_area_relation}[
            subtype
        ](gx, gy)
        if rel != target:
            continue
        taken: set[str] = set()
        lines = []
        for k, (obj, g) in enumerate(((x, gx), (y, gy)), 1):
            if isinstance(obj, Road):
                lines.append(f"{k}. Road: {obj.name} (sampled coordinates along the road: {lls(g)})")
                taken.add(obj.name)
            else:
                label = _aoi_label(obj, taken)
                lines.append(
                    f"{k}. Area: {label} (land use: {humanise(obj.category).lower()}; boundary, a closed "
                    f"ring whose last point joins the first: {lls(g)})"
                )
        return Problem(
            "RE",
            subtype,
            f"In {city.name}, consider:\n" + "\n".join(lines),
            RELATION_QUESTIONS[subtype],
            {"label": rel, "labels": list(RELATION_LABELS[subtype])},
            rel,
            {"geometry": [gx, gy]},
        )
    raise Skip(f"no {subtype} pair with relation {target}")


# ---- advanced -----------------------------------------------------------------------------------------------------


def t_planning(city: City, rng: random.Random) -> Problem:
    k = rng.choice((4, 5))  # locations including the start, as the paper's five-location example
    pool = _unique(city)
    start = rng.choice(pool)
    near = [p for p in pool if p is not start and 0.15 <= G.distance_km(start.ll, p.ll) <= 1.2]
    stops = rng.sample(near, k - 1)
    pts = [r5(p.ll) for p in stops]
    every = [r5(start.ll), *pts]
    if min(G.distance_km(a, b) for i, a in enumerate(every) for b in every[i + 1 :]) < 0.08:
        raise Skip("two locations almost at the same place")
    order, best, second = G.optimal_order(r5(start.ll), pts)
    if second - best < max(0.03, 0.03 * best):
        raise Skip("a second order is nearly as short: not a unique answer")
    listed = [start, *stops]  # the prompt lists the start first, the others in a random order
    chain = []
    for a, b in itertools.pairwise(listed):
        brg, d = G.bearing(r5(a.ll), r5(b.ll)), G.distance_km(r5(a.ll), r5(b.ll))
        chain.append(f"{a.name} -> {b.name}: bearing {brg:.2f} degrees ({G.cardinal16(brg)}), distance {d:.3f} km")
    names = [p.name for p in listed]
    truth = [start.name, *(stops[i].name for i in order)]
    return Problem(
        "PN",
        "",
        f"Here are {k} locations in {city.name}: {', '.join(names)}.\nRelative positions of "
        "consecutive locations in this list:\n" + "\n".join(chain),
        f"Starting at {start.name}, in which order should all the other locations be visited to make the "
        "total straight-line distance as short as possible? The route ends at the last location (no "
        "return to the start).",
        {"order": truth, "length_km": best, "second_km": second},
        "->".join(truth) + f" (total {best:.3f} km)",
        {"names": names},
    )


def t_prediction(city: City, rng: random.Random) -> Problem:
    from rig.maps.routing import RoutingError

    pool = _unique(city)
    o, d = rng.sample(pool, 2)
    if not 0.7 <= G.distance_km(o.ll, d.ll) <= 2.5:
        raise Skip("trip length out of range")
    try:
        route = city.pack.route([o.ll, d.ll], "walk")
    except (RoutingError, ValueError) as exc:
        raise Skip(str(exc)) from None
    geom = route.geometry()
    total = G.polyline_length_m(geom)
    if total < 600:
        raise Skip("route too short")
    # The first 60% of the walk, as 5 points; each named by the street its step follows.
    cut, acc, part = 0.6 * total, 0.0, [geom[0]]
    for a, b in itertools.pairwise(geom):
        seg = haversine_m(a[0], a[1], b[0], b[1])
        if acc + seg >= cut:
            f = (cut - acc) / seg if seg else 0.0
            part.append((a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1])))
            break
        acc += seg
        part.append(b)
    traj = G.round_pts(G.sample_polyline(part, 5), DIGITS)
    steps = [s for leg in route.legs for s in leg.steps]

    def street_at(p: tuple[float, float]) -> str:
        best = min(steps, key=lambda s: min(haversine_m(p[0], p[1], q[0], q[1]) for q in s.geometry))
        return best.street or "a footpath"

    last = traj[-1]
    heading = G.bearing(traj[0], last)
    dd = G.distance_km(last, r5(d.ll))
    if G.angle_diff(heading, G.bearing(last, r5(d.ll))) > 30:
        raise Skip("the trip so far does not point at its destination")
    others = [
        p
        for p in pool
        if p not in (o, d)
        and G.angle_diff(heading, G.bearing(last, r5(p.ll))) >= 90
        and 0.3 * dd <= G.distance_km(last, r5(p.ll)) <= 3 * dd
        and normalise_name(p.name) not in {normalise_name(o.name), normalise_name(d.name)}
    ]
    cands = [d, *rng.sample(others, 4)]
    rng.shuffle(cands)
    letters = "ABCDE"
    lines = [f"{i + 1}. {street_at(p)} {ll(p)}" for i, p in enumerate(traj)]
    opts = [f"{letters[i]}. {c.name} {ll(r5(c.ll))}" for i, c in enumerate(cands)]
    return Problem(
        "PR",
        "",
        f"A person is walking in {city.name}. Their positions so far, in order:\n"
        + "\n".join(lines)
        + "\nCandidate destinations:\n"
        + "\n".join(opts),
        "Based on the direction of travel and the distances, which candidate is the most likely final destination?",
        {"destination": d.name, "letter": letters[cands.index(d)], "candidates": [c.name for c in cands]},
        f"{letters[cands.index(d)]}. {d.name}",
        {"origin": o.name},
    )


def t_navigation(city: City, rng: random.Random) -> Problem:
    net = city.junction_network
    segs = net.segments
    pts = [r5(p) for p in net.points]
    edges = [(s.a, s.b, G.distance_km(pts[s.a], pts[s.b])) for s in segs]  # lengths of what the prompt prints
    s_node = rng.randrange(len(net.points))
    reach = []
    for t in range(len(net.points)):
        if t == s_node:
            continue
        try:
            path, length = G.shortest_path(len(net.points), edges, s_node, t)
        except ValueError:
            continue
        if 3 <= len(path) <= 5 and 0.3 <= length <= 1.0:
            reach.append((t, path, length))
    if not reach:
        raise Skip("no goal 3-5 segments away")
    t_node, p1, len1 = rng.choice(reach)
    alts = []
    for banned in p1:  # a second route: the shortest path with one segment of the first one removed
        rest = [e for i, e in enumerate(edges) if i != banned]
        idx = [i for i in range(len(edges)) if i != banned]
        try:
            p2, len2 = G.shortest_path(len(net.points), rest, s_node, t_node)
        except ValueError:
            continue
        alts.append((len2, [idx[i] for i in p2]))
    alts = sorted(a for a in alts if a[0] >= 1.08 * len1 and len(a[1]) <= 7)
    if not alts:
        raise Skip("no distinct second route")
    chosen = sorted(set(p1) | set(alts[0][1]))
    nodes = {n for i in chosen for n in (segs[i].a, segs[i].b)}
    spurs = [i for i, sg in enumerate(segs) if i not in chosen and (sg.a in nodes) != (sg.b in nodes)]
    chosen = sorted(set(chosen) | set(rng.sample(spurs, min(2, len(spurs)))))
    small = [edges[i] for i in chosen]
    lengths = G.simple_path_lengths(small, s_node, t_node)
    if not lengths or abs(lengths[0] - len1) > 1e-9 or (len(lengths) > 1 and lengths[1] < 1.05 * lengths[0]):
        raise Skip("the shortest route is not clearly unique in the shown network")

    label = _junction_label(net.names)
    listed = chosen[:]
    rng.shuffle(listed)
    seg_lines = [f"{segs[i].name}: {ll(pts[segs[i].a])} -- {ll(pts[segs[i].b])}" for i in listed]
    steps, streets = _directions(segs, pts, p1, s_node)
    steps.append(f"Arrive at {label(t_node)} {ll(pts[t_node])}")
    return Problem(
        "NV",
        "",
        f"Walking network in {city.name} (each segment is a straight, two-way street section "
        "between the two points given):\n" + "\n".join(seg_lines),
        f"I am walking from {label(s_node)} {ll(pts[s_node])} to {label(t_node)} {ll(pts[t_node])}, using "
        "only these segments. What is the shortest route? Give step-by-step, turn-by-turn directions.",
        {"streets": streets, "length_km": len1, "second_km": lengths[1] if len(lengths) > 1 else None},
        "; ".join(f"{k + 1}. {s}" for k, s in enumerate(steps)) + f" (total {len1:.3f} km)",
        {"segments": [segs[i].name for i in listed]},
    )


def _junction_label(names: list[list[str]]) -> Callable[[int], str]:
    """How a prompt names a junction: the corner of its first two streets, or the end of its one street."""

    def label(n: int) -> str:
        meet = names[n]
        if len(meet) >= 2:
            return f"the corner of {meet[0]} and {meet[1]}"
        return f"the end of {meet[0]}" if meet else "a junction"

    return label


def _directions(
    segs: list[Segment], pts: list[tuple[float, float]], path: list[int], start: int
) -> tuple[list[str], list[str]]:
    """Turn-by-turn directions along ``path`` (segment ids) from junction ``start``, and the streets in order.
    Ground truth: the path's segments in travel order, with turns from the headings."""
    order, at = [], start
    for i in path:
        sg = segs[i]
        nxt = sg.b if sg.a == at else sg.a
        order.append((sg.name, at, nxt))
        at = nxt
    # Consecutive segments of one street are one instruction, as turn-by-turn directions read.
    groups: list[list[tuple[str, int, int]]] = []
    for step in order:
        if groups and groups[-1][-1][0] == step[0]:
            groups[-1].append(step)
        else:
            groups.append([step])
    steps: list[str] = []
    prev_brg = None
    for grp in groups:
        name, b = grp[0][0], grp[-1][2]
        d = sum(G.distance_km(pts[x], pts[y]) for _, x, y in grp)
        brg_in = G.bearing(pts[grp[0][1]], pts[grp[0][2]])
        if prev_brg is None:
            steps.append(f"Head {G.cardinal8(brg_in).lower()} on {name} to {ll(pts[b])} ({d:.3f} km)")
        else:
            steps.append(f"{G.turn_word(prev_brg, brg_in).capitalize()} onto {name} to {ll(pts[b])} ({d:.3f} km)")
        prev_brg = G.bearing(pts[grp[-1][1]], pts[grp[-1][2]])
    return steps, [grp[0][0] for grp in groups]


def t_recommendation(city: City, rng: random.Random) -> Problem:
    pool = [p for p in _unique(city) if p.category in FOOD and H.parse(p.opening_hours)]
    here = rng.choice(_unique(city))
    cat = rng.choice(FOOD)
    radius = rng.choice((300, 400, 500))
    day, minute = rng.randrange(7), rng.choice(range(8 * 60, 22 * 60, 15))

    def dist(p: Poi) -> float:
        return haversine_m(here.lat, here.lon, p.lat, p.lon)

    def clear_time(p: Poi) -> bool:
        return H.margin_minutes(H.parse(p.opening_hours), day, minute) >= 30  # type: ignore[arg-type]

    def open_(p: Poi) -> bool:
        return H.is_open(H.parse(p.opening_hours), day, minute)  # type: ignore[arg-type]

    pool = [p for p in pool if p is not here and clear_time(p)]
    inside = [p for p in pool if dist(p) <= 0.8 * radius]
    good = [p for p in inside if p.category == cat and open_(p)]
    far = [p for p in pool if p.category == cat and open_(p) and 1.25 * radius <= dist(p) <= 3 * radius]
    closed = [p for p in inside if p.category == cat and not open_(p)]
    other = [p for p in inside if p.category != cat and open_(p)]
    if not good:
        raise Skip("nothing fits")
    answer = rng.choice(good)
    kinds = [far, closed, other]
    picks: list[Poi] = []
    for group in kinds:  # one distractor per violated constraint, where the pack has one
        cand = [p for p in group if p not in picks]
        if cand:
            picks.append(rng.choice(cand))
    spare = [p for g in kinds for p in g if p not in picks]
    while len(picks) < 4 and spare:
        x = rng.choice(spare)
        spare.remove(x)
        picks.append(x)
    if len(picks) < 4:
        raise Skip("too few distractors")
    cands = [answer, *picks]
    fits = [p for p in cands if p.category == cat and dist(p) <= radius and open_(p)]
    if fits != [answer]:
        raise Skip("more than one candidate meets every constraint")
    rng.shuffle(cands)
    lines = []
    for p in cands:
        info = [f"category: {humanise(p.category).lower()}"]
        if p.extra.get("cuisine"):
            info.append(f"cuisine: {p.extra['cuisine'].replace('_', ' ').replace(';', ', ')}")
        info.append(f"opening hours (OSM syntax): {p.opening_hours}")
        if p.extra.get("wheelchair"):
            info.append(f"wheelchair access: {p.extra['wheelchair']}")
        lines.append(f"- {p.name} {ll(r5(p.ll))}: " + "; ".join(info))
    when = f"{H.DAY_NAMES[day]} {minute // 60:02d}:{minute % 60:02d}"
    return Problem(
        "RC",
        "",
        f"I am at {ll(r5(here.ll))} in {city.name}, next to {here.name}. Nearby options:\n" + "\n".join(lines),
        f"It is {when}. I want a {humanise(cat).lower()} within {radius} m (straight-line distance) of "
        "where I am that is open right now. Which one place should I go to?",
        {"poi": answer.name, "candidates": [p.name for p in cands]},
        f"{answer.name} ({dist(answer):.0f} m away, open on {when})",
        {"category": cat, "radius_m": radius, "day": day, "minute": minute, "here": [here.lat, here.lon]},
    )


GENERATORS = {
    "DS": t_distance,
    "DR": t_direction,
    "RE": t_relation,
    "PN": t_planning,
    "PR": t_prediction,
    "NV": t_navigation,
    "RC": t_recommendation,
}


def generate(city: City, task: str, n: int, seed: int) -> list[Problem]:
    """Up to n problems of one task; deterministic for (pack, task, n, seed). Relation problems cycle through the
    three subtypes."""
    rng = random.Random(f"urbangeo-reasoning:{seed}:{city.source_sha256}:{task}")
    out: list[Problem] = []
    seen: set[str] = set()
    for k in range(max(60, 60 * n)):
        if len(out) >= n:
            break
        try:
            if task == "RE":
                p = t_relation(city, rng, RELATION_SUBTYPES[len(out) % 3] if k % 50 < 40 else None)
            else:
                p = GENERATORS[task](city, rng)
        except (Skip, IndexError, ValueError):
            continue
        if p.prompt in seen:
            continue
        seen.add(p.prompt)
        out.append(p)
    return out
