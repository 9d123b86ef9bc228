"""Shortest (fastest) paths on a pack's graph: scipy.sparse.csgraph Dijkstra over a CSR matrix per mode and
avoid set, built lazily and cached, then turned into legs and turn-by-turn steps."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from itertools import pairwise
from typing import Any, cast

import numpy as np

from rig.maps import profiles
from rig.maps.geo import bearing_deg, compass, haversine_m, metres_to_chord, to_xyz
from rig.maps.records import LatLon, Mode, Route, RouteLeg, RouteStep

MAX_SNAP_M = 2_000.0  # waypoints further than this from the mode's network are refused, not silently moved


class RoutingError(ValueError):
    """No route: waypoint off the map, or no path under the avoid options."""


def avoid_mask(avoid: Iterable[str]) -> int:
    mask = 0
    for a in avoid:
        if a not in profiles.AVOID_FLAGS:
            raise ValueError(f"unknown avoid option {a!r}; expected one of {sorted(profiles.AVOID_FLAGS)}")
        mask |= profiles.AVOID_FLAGS[a]
    return mask


class _ModeGraph:
    """CSR adjacency for one (mode, avoid) pair; parallel edges keep the fastest one."""

    def __init__(self, n: int, edge_ids: np.ndarray, src: np.ndarray, dst: np.ndarray, cost: np.ndarray) -> None:
        from scipy.sparse import csr_matrix

        order = np.lexsort((cost, dst, src))
        s, d, c, e = src[order], dst[order], cost[order], edge_ids[order]
        keep = np.ones(len(s), dtype=bool)
        keep[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
        s, d, c, e = s[keep], d[keep], c[keep], e[keep]
        # Explicit zero weights would read as "no edge" in some csgraph paths: floor them.
        self.matrix = csr_matrix((np.maximum(c, 1e-6), (s, d)), shape=(n, n))
        self.matrix.sort_indices()
        # csr_matrix keeps (s, d) order after sorting, so edge ids line up with matrix.data.
        self.edge_of_entry = e
        self.indptr, self.indices = self.matrix.indptr, self.matrix.indices

    def edge_between(self, u: int, v: int) -> int:
        lo, hi = self.indptr[u], self.indptr[u + 1]
        k = lo + int(np.searchsorted(self.indices[lo:hi], v))
        return int(self.edge_of_entry[k])


class Router:
    def __init__(self, g: dict[str, np.ndarray]) -> None:
        self.g = g
        self.lat, self.lon = g["node_lat"], g["node_lon"]
        self.names = [str(x) for x in g["names"]]
        self._graphs: dict[tuple[str, int], _ModeGraph] = {}
        self._trees: dict[str, tuple[Any, np.ndarray]] = {}  # scipy cKDTree, nodes

    @cached_property
    def _durations(self) -> dict[str, np.ndarray]:
        length = self.g["length_m"].astype(np.float64)
        return {
            "walk": length / self.g["walk_mps"],
            "bike": length / self.g["bike_mps"],
            "drive": length / (self.g["drive_kmh"].astype(np.float64) / 3.6),
        }

    def graph(self, mode: str, mask: int) -> _ModeGraph:
        key = (mode, mask)
        if key not in self._graphs:
            ok = (self.g["modes"] & profiles.MODE_BITS[mode]) > 0
            if mask:
                ok &= (self.g["flags"] & mask) == 0
            ids = np.nonzero(ok)[0]
            self._graphs[key] = _ModeGraph(
                len(self.lat), ids, self.g["src"][ids], self.g["dst"][ids], self._durations[mode][ids]
            )
        return self._graphs[key]

    def snap(self, mode: str, lat: float, lon: float) -> tuple[int, float]:
        """Nearest node of the mode's main connected component, and its distance in metres."""
        from scipy.spatial import cKDTree

        if mode not in self._trees:
            nodes = np.nonzero(self.g[f"snap_{mode}"])[0]
            if len(nodes) == 0:
                raise RoutingError(f"this pack has no {mode} network")
            self._trees[mode] = (cKDTree(to_xyz(self.lat[nodes], self.lon[nodes])), nodes)
        tree, nodes = self._trees[mode]
        chord, i = tree.query(to_xyz([lat], [lon])[0], distance_upper_bound=metres_to_chord(MAX_SNAP_M))
        if not np.isfinite(chord):
            raise RoutingError(f"({lat:.6f}, {lon:.6f}) is more than {MAX_SNAP_M:.0f} m from the {mode} network")
        node = int(nodes[i])
        return node, haversine_m(lat, lon, float(self.lat[node]), float(self.lon[node]))

    def path(self, mode: str, mask: int, a: int, b: int) -> list[int]:
        """Edge ids of the fastest path from node a to node b."""
        from scipy.sparse.csgraph import dijkstra

        if a == b:
            return []
        mg = self.graph(mode, mask)
        dist, pred = dijkstra(mg.matrix, directed=True, indices=a, return_predecessors=True)
        if not np.isfinite(dist[b]):
            raise RoutingError(f"no {mode} path between the waypoints with these avoid options")
        nodes = [b]
        while nodes[-1] != a:
            nodes.append(int(pred[nodes[-1]]))
        nodes.reverse()
        return [mg.edge_between(u, v) for u, v in pairwise(nodes)]

    def route(self, waypoints: list[tuple[float, float]], mode: str, avoid: Iterable[str] = ()) -> Route:
        if mode not in profiles.MODE_BITS:
            raise ValueError(f"unknown mode {mode!r}")
        if len(waypoints) < 2:
            raise ValueError("a route needs at least two waypoints")
        avoid_list = sorted(set(avoid))
        mask = avoid_mask(avoid_list)
        snaps = [self.snap(mode, lat, lon) for lat, lon in waypoints]
        legs = []
        for (p, (na, da)), (q, (nb, db)) in pairwise(zip(waypoints, snaps, strict=True)):
            edges = self.path(mode, mask, na, nb)
            legs.append(self._leg(mode, p, q, na, nb, da, db, edges))
        # mode was checked against MODE_BITS above
        return Route(
            mode=cast(Mode, mode),
            avoid=avoid_list,
            legs=legs,
            distance_m=round(sum(leg.distance_m for leg in legs), 3),
            duration_s=round(sum(leg.duration_s for leg in legs), 3),
        )

    # -- steps ---------------------------------------------------------------------------------------

    def _leg(self, mode, p, q, na, nb, da, db, edges) -> RouteLeg:
        g, dur = self.g, self._durations[mode]
        base = profiles.BASE_MPS[mode]
        # Group consecutive edges on the same named way into one step, as turn-by-turn directions do.
        groups: list[list[int]] = []
        for e in edges:
            if groups and g["name"][groups[-1][-1]] == g["name"][e]:
                groups[-1].append(e)
            else:
                groups.append([e])
        steps: list[RouteStep] = []
        prev_bearing = None
        for i, grp in enumerate(groups):
            pts = [(float(self.lat[g["src"][grp[0]]]), float(self.lon[g["src"][grp[0]]]))]
            pts += [(float(self.lat[g["dst"][e]]), float(self.lon[g["dst"][e]])) for e in grp]
            dist = float(sum(g["length_m"][e] for e in grp))
            secs = float(sum(dur[e] for e in grp))
            if i == 0:  # access from the asked point to the graph counts in the leg
                pts.insert(0, (p[0], p[1]))
                dist, secs = dist + da, secs + da / base
            if i == len(groups) - 1:
                pts.append((q[0], q[1]))
                dist, secs = dist + db, secs + db / base
            e0 = grp[0]
            b_in = bearing_deg(
                self.lat[g["src"][e0]], self.lon[g["src"][e0]], self.lat[g["dst"][e0]], self.lon[g["dst"][e0]]
            )
            name_i = int(g["name"][e0])
            street = self.names[name_i] if name_i >= 0 else None
            maneuver, text = _maneuver(prev_bearing, b_in, street)
            e_last = grp[-1]
            prev_bearing = bearing_deg(
                self.lat[g["src"][e_last]],
                self.lon[g["src"][e_last]],
                self.lat[g["dst"][e_last]],
                self.lon[g["dst"][e_last]],
            )
            flags = 0
            for e in grp:
                flags |= int(g["flags"][e])
            steps.append(
                RouteStep(
                    instruction=text,
                    maneuver=maneuver,
                    street=street,
                    distance_m=round(dist, 3),
                    duration_s=round(secs, 3),
                    start=LatLon(lat=pts[0][0], lon=pts[0][1]),
                    end=LatLon(lat=pts[-1][0], lon=pts[-1][1]),
                    bearing_deg=round(b_in, 1),
                    geometry=pts,
                    flags=[name for bit, name in profiles.FLAG_NAMES.items() if flags & bit],
                )
            )
        if not steps:  # both waypoints snap to the same node: straight-line access only
            d = da + db
            steps.append(
                RouteStep(
                    instruction="Head to the destination",
                    maneuver="depart",
                    street=None,
                    distance_m=round(d, 3),
                    duration_s=round(d / base, 3),
                    start=LatLon(lat=p[0], lon=p[1]),
                    end=LatLon(lat=q[0], lon=q[1]),
                    bearing_deg=round(bearing_deg(p[0], p[1], q[0], q[1]), 1),
                    geometry=[(p[0], p[1]), (float(self.lat[na]), float(self.lon[na])), (q[0], q[1])],
                )
            )
        return RouteLeg(
            start=LatLon(lat=p[0], lon=p[1]),
            end=LatLon(lat=q[0], lon=q[1]),
            start_snap_m=round(da, 3),
            end_snap_m=round(db, 3),
            steps=steps,
            distance_m=round(sum(s.distance_m for s in steps), 3),
            duration_s=round(sum(s.duration_s for s in steps), 3),
        )


def _maneuver(prev: float | None, cur: float, street: str | None) -> tuple[str, str]:
    onto = f" onto {street}" if street else ""
    if prev is None:
        return "depart", f"Head {compass(cur)}" + (f" on {street}" if street else "")
    turn = (cur - prev + 540.0) % 360.0 - 180.0  # signed, right positive
    a = abs(turn)
    side = "right" if turn > 0 else "left"
    if a < 20:
        return "straight", f"Continue{onto}" if street else "Continue straight"
    if a < 60:
        return f"turn-slight-{side}", f"Slight {side}{onto}"
    if a < 135:
        return f"turn-{side}", f"Turn {side}{onto}"
    if a < 165:
        return f"turn-sharp-{side}", f"Sharp {side}{onto}"
    return f"uturn-{side}", f"Make a U-turn{onto}"
