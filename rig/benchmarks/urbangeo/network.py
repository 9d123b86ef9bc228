"""The simplified junction network the navigation task shows: named walkable streets of a map pack contracted to
junctions, each stretch of one street between two junctions one straight segment (ordered deterministically, as the
rest of `world.py`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rig.maps.geo import haversine_m

if TYPE_CHECKING:
    from rig.benchmarks.urbangeo.world import City


@dataclass
class Segment:
    a: int  # junction ids
    b: int
    name: str
    length_km: float  # straight line between the junctions: the network the prompt shows


@dataclass
class JunctionNetwork:
    """Named walkable streets contracted to junctions (where differently named streets meet or a street ends),
    junctions closer than MERGE_M merged, each stretch of one street between two junctions one straight segment."""

    points: list[tuple[float, float]]
    names: list[list[str]]  # street names meeting at each junction
    segments: list[Segment]

    MERGE_M = 30.0

    @classmethod
    def build(cls, city: City) -> JunctionNetwork:
        from rig.maps.profiles import MODE_BITS

        g = city._graph
        names = [str(x) for x in g["names"]]
        streets = {r.name for r in city.roads}
        adj: dict[int, dict[int, str]] = {}
        for e in range(len(g["src"])):
            ni = int(g["name"][e])
            if ni < 0 or names[ni] not in streets or not (g["modes"][e] & MODE_BITS["walk"]):
                continue
            u, v = int(g["src"][e]), int(g["dst"][e])
            if u == v:
                continue
            adj.setdefault(u, {})[v] = names[ni]
            adj.setdefault(v, {})[u] = names[ni]
        is_junction = {n for n, nb in adj.items() if len(nb) != 2 or len(set(nb.values())) > 1}
        # Merge junctions within MERGE_M (dual carriageways, crossings mapped as several nodes): union-find.
        jlist = sorted(is_junction)
        from scipy.spatial import cKDTree

        from rig.maps.geo import metres_to_chord, to_xyz

        xyz = to_xyz([g["node_lat"][n] for n in jlist], [g["node_lon"][n] for n in jlist])
        parent = list(range(len(jlist)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i, j in sorted(cKDTree(xyz).query_pairs(metres_to_chord(cls.MERGE_M))):
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
        roots = sorted({find(i) for i in range(len(jlist))})
        cid = {r: k for k, r in enumerate(roots)}
        cluster_of = {n: cid[find(i)] for i, n in enumerate(jlist)}
        members: dict[int, list[int]] = {}
        for n, c in cluster_of.items():
            members.setdefault(c, []).append(n)
        points = []
        for c in range(len(roots)):
            ms = sorted(members[c])
            points.append(
                (float(np.mean([g["node_lat"][n] for n in ms])), float(np.mean([g["node_lon"][n] for n in ms])))
            )
        meet: list[set[str]] = [set() for _ in roots]
        for n, c in cluster_of.items():
            meet[c].update(adj[n].values())
        # Walk each street stretch from a junction to the next one.
        best: dict[tuple[int, int, str], float] = {}
        for start in jlist:
            for nxt, name in sorted(adj[start].items()):
                prev, cur = start, nxt
                while cur not in is_junction:
                    step = [v for v in sorted(adj[cur]) if v != prev]
                    if not step:
                        break
                    prev, cur = cur, step[0]
                if cur not in is_junction:
                    continue
                a, b = cluster_of[start], cluster_of[cur]
                if a == b:
                    continue
                key = (min(a, b), max(a, b), name)
                d = haversine_m(*points[a], *points[b]) / 1000.0
                best[key] = min(best.get(key, math.inf), d)
        segs = [Segment(a, b, name, d) for (a, b, name), d in sorted(best.items())]
        return cls(points=points, names=[sorted(s) for s in meet], segments=segs)
