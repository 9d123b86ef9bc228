"""RouteEval's gold and anti-gold calls for `rig selftest`.

The data holds no gold route, only a target, a route type and a reference list of places, so the gold agent builds
one on the map: the reference closed as its route type asks (a loop returns to its start, an out-and-back comes back
through its places), then improved one waypoint at a time (insert a named place, replace or drop one the prompt
does not name) while the walking distance, measured by the benchmark's own validator, moves closer to the target.
Candidates are ranked by a one-to-all walking search from each neighbour, and only the best few are measured.
On a discrete map the distance rarely equals the target: accuracy's cap (README, "Caps of the metrics").

Anti-gold calls the tool well formed with another route type and one place twice: a route of length 0, accuracy 0.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from rig.agents.scripted import Call, Player
from rig.benchmarks.base import GoldUnavailable, MetricRole
from rig.benchmarks.routeeval.data import RoutePrompt
from rig.benchmarks.routeeval.prompts import ADDRESS_MAX, TOOL_NAME
from rig.benchmarks.routeeval.validate import METRES_PER_MILE, RouteValidator, Site, words
from rig.maps.text import normalise_name

ROUTE_TYPES = ("loop", "out-and-back", "point-to-point")
_ROUNDS = 12  # improvement steps at most (each changes one waypoint)
_MEASURED = 12  # candidate routes measured exactly per step, best estimates first
_GOOD_ENOUGH = 0.001  # stop once within 0.1% of the target


@dataclass(frozen=True)
class Stop:
    address: str
    lat: float
    lon: float
    pinned: bool  # named by the prompt (or its start and end): kept


def _closed(prompt: RoutePrompt) -> list[str]:
    ref = list(prompt.reference)
    if prompt.route_type == "loop":
        return [*ref, ref[0]]
    if prompt.route_type == "out-and-back":
        return [*ref, *ref[-2::-1]]
    return ref


class Planner:
    """Walking distances on one site's pack, as the validator measures them, for building a route."""

    def __init__(self, validator: RouteValidator, site_i: int, city: str | None, max_waypoints: int) -> None:
        self.v, self.site_i, self.city, self.max = validator, site_i, city, max_waypoints
        site: Site = validator.sites[site_i]
        self.pack: Any = site.pack  # a MapPack; None for a replay store alone (no network to search)
        self._from: dict[tuple[float, float], np.ndarray] = {}
        self._lengths: Any = None
        self._cands: list[tuple[str, float, float, int, float]] | None = None  # name, lat, lon, node, snap metres

    def stop(self, address: str, pinned: bool) -> Stop | None:
        g = self.v.geocode(self.site_i, address, self.city)
        return None if g is None else Stop(address, g.lat, g.lon, pinned)

    def leg(self, a: Stop, b: Stop) -> float:
        return self.v.leg(self.site_i, (a.lat, a.lon), (b.lat, b.lon))

    def length(self, route: list[Stop]) -> float:
        return sum(self.leg(a, b) for a, b in pairwise(route))

    def candidates(self) -> list[tuple[str, float, float, int, float]]:
        """Places whose name is theirs alone (the geocoder's exact match), with their walking-network node."""
        if self._cands is None:
            from rig.maps.routing import RoutingError

            pack, router = self.pack, self.pack.router
            shared = Counter(pack.names_norm)
            out = []
            for i, row in enumerate(pack.rows):
                name = row[2]  # the place's display name (rig.maps.query's place columns)
                if pack.kind[i] not in ("poi", "area") or not name or not words(name):
                    continue
                if "," in name or len(name) > ADDRESS_MAX - 20 or shared[pack.names_norm[i]] != 1:
                    continue  # a comma would split the address; a shared name may geocode to its twin
                try:
                    node, snap = router.snap("walk", float(pack.lat[i]), float(pack.lon[i]))
                except RoutingError:  # off the walking network: not a place to run through
                    continue
                out.append((name, float(pack.lat[i]), float(pack.lon[i]), node, snap))
            self._cands = out
        return self._cands

    def reach(self, s: Stop) -> np.ndarray:
        """Walking metres from ``s`` to every candidate along the fastest paths, as the router measures a leg
        (walking is symmetric, so the same array serves as the way back)."""
        key = (s.lat, s.lon)
        if key not in self._from:
            from scipy.sparse import csr_matrix
            from scipy.sparse.csgraph import dijkstra

            router = self.pack.router
            mg = router.graph("walk", 0)
            if self._lengths is None:  # the metres of each edge the fastest-path search can take
                metres = router.g["length_m"][mg.edge_of_entry].astype(np.float64)
                self._lengths = csr_matrix((metres, mg.indices, mg.indptr), shape=mg.matrix.shape)
            node, snap = router.snap("walk", s.lat, s.lon)
            secs, pred = dijkstra(mg.matrix, directed=True, indices=node, return_predecessors=True)
            reached = np.nonzero(pred >= 0)[0]
            step = np.zeros(len(secs))
            step[reached] = np.asarray(self._lengths[pred[reached], reached]).ravel()
            metres_to = np.full(len(secs), np.inf)
            metres_to[node] = 0.0
            for v in reached[np.argsort(secs[reached])]:  # a node's predecessor is nearer, so already summed
                metres_to[v] = metres_to[pred[v]] + step[v]
            cands = self.candidates()
            nodes = np.array([c[3] for c in cands], dtype=np.int64)
            snaps = np.array([c[4] for c in cands])
            self._from[key] = metres_to[nodes] + snaps + snap
        return self._from[key]


def _options(p: Planner, route: list[Stop], total: float, target: float) -> list[tuple[float, list[Stop]]]:
    """Estimated (error, route) for every one-waypoint change, best estimates first."""
    cands = p.candidates()
    out: list[tuple[float, list[Stop]]] = []

    def add(est: np.ndarray, make: Any) -> None:
        err = np.abs(est - target)
        for k in np.argsort(err)[:3]:
            n, lat, lon, _, _ = cands[int(k)]
            out.append((float(err[k]), make(Stop(f"{n}, {p.city}" if p.city else n, lat, lon, False))))

    for i in range(1, len(route)):
        a, b = route[i - 1], route[i]
        if len(route) < p.max:
            est = total - p.leg(a, b) + p.reach(a) + p.reach(b)
            add(est, lambda c, i=i: [*route[:i], c, *route[i:]])
        if i < len(route) - 1 and not b.pinned:
            nxt = route[i + 1]
            base = total - p.leg(a, b) - p.leg(b, nxt)
            add(base + p.reach(a) + p.reach(nxt), lambda c, i=i: [*route[:i], c, *route[i + 1 :]])
            if len(route) > 3:
                out.append((abs(base + p.leg(a, nxt) - target), [*route[:i], *route[i + 1 :]]))
    out.sort(key=lambda x: x[0])
    return out


def build_route(prompt: RoutePrompt, validator: RouteValidator, max_waypoints: int, where: str) -> list[str]:
    """The waypoints (addresses as written in the call) of a route whose measured length is as close to the target
    as one-waypoint changes of the closed reference reach."""
    site_i = next((i for i, s in enumerate(validator.sites) if s.covers(prompt.city)), None)
    if site_i is None or not prompt.reference:
        raise GoldUnavailable(f"{where}.reference: no reference places on a map that covers the prompt")
    p = Planner(validator, site_i, prompt.city, max_waypoints)
    text = normalise_name(prompt.text)
    said = {normalise_name(v) for k, v in validator.aliases.items() if normalise_name(k) in text}
    closed = _closed(prompt)
    route = []
    for k, addr in enumerate(closed):
        named = k in (0, len(closed) - 1) or normalise_name(addr) in text or normalise_name(addr) in said
        s = p.stop(addr, named)
        if s is None:
            raise GoldUnavailable(f"{where}.reference: {addr!r} is not on the map")
        route.append(s)
    while len(route) > max_waypoints:  # drop the place whose removal costs least, never a pinned one
        drop = [i for i in range(1, len(route) - 1) if not route[i].pinned]
        if not drop:
            raise GoldUnavailable(f"{where}.reference: more places than a call takes")
        route.pop(min(drop, key=lambda i: p.leg(route[i - 1], route[i]) + p.leg(route[i], route[i + 1])))
    target = prompt.target_miles * METRES_PER_MILE
    total = p.length(route)
    if p.pack is None:  # a replay store alone: no network to search, the closed reference as it is
        return [s.address for s in route]
    for _ in range(_ROUNDS):
        if abs(total - target) <= _GOOD_ENOUGH * target:
            break
        best: tuple[float, list[Stop]] | None = None
        for _, option in _options(p, route, total, target)[:_MEASURED]:
            placed = [s if s.pinned else p.stop(s.address, False) for s in option]  # where the validator puts it
            cand = [s for s in placed if s is not None]
            if len(cand) < len(placed):
                continue
            d = p.length(cand)
            if best is None or abs(d - target) < abs(best[0] - target):
                best = (d, cand)
        if best is None or abs(best[0] - target) >= abs(total - target):
            break
        total, route = best
    return [s.address for s in route]


def gold_call(prompt: RoutePrompt, addresses: list[str]) -> Call:
    return Call(
        TOOL_NAME,
        {
            "estimated_distance": prompt.target_miles,
            "route_type": prompt.route_type,
            "waypoints": [{"address": a, "description": "on the way"} for a in addresses],
        },
    )


def gold(prompt: RoutePrompt, validator: RouteValidator, max_waypoints: int, where: str) -> Player:
    call = gold_call(prompt, build_route(prompt, validator, max_waypoints, where))
    return lambda _request: call


def anti_gold(prompt: RoutePrompt, where: str) -> Player:
    if not prompt.reference:
        raise GoldUnavailable(f"{where}.reference: no reference places")
    other = next(t for t in ROUTE_TYPES if t != prompt.route_type)
    place = {"address": prompt.reference[0], "description": "start"}
    call = Call(TOOL_NAME, {"estimated_distance": prompt.target_miles, "route_type": other, "waypoints": [place] * 2})
    return lambda _request: call


def metrics() -> dict[str, MetricRole]:
    return {"accuracy": "score", "success": "score", "perfect": "score", "route_type_match": "score"}


CAPS = {
    "accuracy": "1 only when the walked route is exactly the target length, which a map's discrete network of "
    "named places almost never allows; gold lands as close as one-waypoint changes reach (README: Caps of the metrics)",
}
