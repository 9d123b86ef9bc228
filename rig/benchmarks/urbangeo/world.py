"""What a map pack holds, in the shapes the generators need: POIs, AOIs (named land-use polygons), roads (named
streets with their graph nodes and a centre polyline) and a simplified junction network.

Everything here is read-only and ordered deterministically (sorted by stable keys, never by set order), so the
generators draw the same questions for the same seed on every machine.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rig.maps.geo import haversine_m
from rig.maps.text import normalise_name

if TYPE_CHECKING:
    from rig.benchmarks.urbangeo.network import JunctionNetwork

# Map furniture and transit stops make poor knowledge probes (dozens share a name, none is a place people know).
MINOR_CATEGORIES = {
    "bus_stop",
    "tram_stop",
    "stop_position",
    "platform",
    "subway_entrance",
    "halt",
    "stop_area",
    "yes",
    "city_block",
    "suburb",
    "neighbourhood",
    "quarter",
    "water",
    "bench",
    "waste_basket",
    "vending_machine",
    "parking_entrance",
    "bicycle_parking",
    "charging_station",
    "atm",
}

# The paper's 13 canonical land-use types (appendix A.1.2 names four; the rest are ours), and the OSM values that
# map onto them. An AOI whose tag maps to none of them is left out of the Landuse_AOI template.
LANDUSE_TYPES = (
    "Residential",
    "Commercial",
    "Retail",
    "Industrial",
    "Education",
    "Healthcare",
    "Park&GreenLand",
    "Sports&Recreation",
    "Water",
    "Forest&Nature",
    "Agriculture",
    "Public&Civic",
    "Religious&Cemetery",
)
_LANDUSE_OF = {
    "residential": "Residential",
    "commercial": "Commercial",
    "retail": "Retail",
    "industrial": "Industrial",
    "education": "Education",
    "school": "Education",
    "university": "Education",
    "college": "Education",
    "hospital": "Healthcare",
    "park": "Park&GreenLand",
    "garden": "Park&GreenLand",
    "grass": "Park&GreenLand",
    "village_green": "Park&GreenLand",
    "recreation_ground": "Park&GreenLand",
    "playground": "Sports&Recreation",
    "pitch": "Sports&Recreation",
    "sports_centre": "Sports&Recreation",
    "stadium": "Sports&Recreation",
    "track": "Sports&Recreation",
    "bandstand": "Sports&Recreation",
    "water": "Water",
    "basin": "Water",
    "reservoir": "Water",
    "wood": "Forest&Nature",
    "forest": "Forest&Nature",
    "scrub": "Forest&Nature",
    "heath": "Forest&Nature",
    "wetland": "Forest&Nature",
    "nature_reserve": "Forest&Nature",
    "farmland": "Agriculture",
    "farmyard": "Agriculture",
    "meadow": "Agriculture",
    "orchard": "Agriculture",
    "allotments": "Agriculture",
    "civil": "Public&Civic",
    "government": "Public&Civic",
    "military": "Public&Civic",
    "religious": "Religious&Cemetery",
    "cemetery": "Religious&Cemetery",
}


def landuse_type(category: str | None) -> str | None:
    return _LANDUSE_OF.get(category or "")


def humanise(category: str | None) -> str:
    """OSM tag value as words: "fast_food" -> "Fast food"."""
    return (category or "place").replace("_", " ").strip().capitalize()


@dataclass(frozen=True)
class Poi:
    i: int  # row in the pack's gazetteer: a stable id
    name: str
    category: str
    category_key: str
    address: str | None
    tagged_address: bool  # the address comes from OSM addr:* tags (not borrowed from the nearest street)
    lat: float
    lon: float
    opening_hours: str | None
    extra: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def ll(self) -> tuple[float, float]:
        return (self.lat, self.lon)


@dataclass(eq=False)  # identity: AOIs are compared as the same cached objects, never by geometry
class Aoi:
    key: str  # normalised name for named AOIs, "area/<osm id>" otherwise
    name: str | None
    category: str
    category_key: str
    geom: Any  # shapely geometry in (lon, lat) (shapely ships no type hints)
    area_m2: float
    address: str | None
    lat: float
    lon: float

    @property
    def landuse(self) -> str | None:
        return landuse_type(self.category)

    def outer_ring(self) -> list[tuple[float, float]]:
        """(lat, lon) of the largest outer ring: the boundary a prompt samples."""
        from shapely.geometry import MultiPolygon

        g = self.geom
        poly = max(g.geoms, key=lambda p: p.area) if isinstance(g, MultiPolygon) else g
        return [(y, x) for x, y in poly.exterior.coords]


@dataclass
class Road:
    name: str
    nodes: frozenset[int]
    length_m: float  # total mapped length of the ways with this name (each carriageway once), the pack's figure
    polyline: list[tuple[float, float]]  # the longest chain through the road's largest connected piece


class City:
    """One map pack, indexed for question generation."""

    def __init__(self, pack_dir: str | Path) -> None:
        from rig.maps.query import MapPack

        self.pack = MapPack.open(pack_dir)
        self.dir = Path(pack_dir)
        self.name = self.pack.info.city or self.dir.name
        self.source_sha256 = self.pack.info.source_sha256

    # ---- POIs ---------------------------------------------------------------------------------------------------

    @cached_property
    def pois(self) -> list[Poi]:
        out = []
        for i, r in enumerate(self.pack.rows):
            if r[1] != "poi" or not r[2] or not r[4] or r[4] in MINOR_CATEGORIES:
                continue
            out.append(
                Poi(
                    i=i,
                    name=r[2],
                    category=r[4],
                    category_key=r[5] or "",
                    address=r[6],
                    tagged_address=r[7] == "tags",
                    lat=float(r[9]),
                    lon=float(r[10]),
                    opening_hours=r[11],
                    extra=json.loads(r[12] or "{}"),
                )
            )
        return out

    @cached_property
    def pois_by_name(self) -> dict[str, list[Poi]]:
        out: dict[str, list[Poi]] = {}
        for p in self.pois:
            out.setdefault(normalise_name(p.name), []).append(p)
        return out

    @cached_property
    def _poi_xy(self) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([p.lat for p in self.pois]), np.array([p.lon for p in self.pois]))

    def distances_m(self, lat: float, lon: float) -> np.ndarray:
        from rig.maps.geo import haversine_many_m

        la, lo = self._poi_xy
        return haversine_many_m(lat, lon, la, lo)

    def unique_name(self, p: Poi) -> bool:
        return len(self.pois_by_name[normalise_name(p.name)]) == 1

    # ---- AOIs ---------------------------------------------------------------------------------------------------

    @cached_property
    def aois(self) -> list[Aoi]:
        """Named AOIs merged by name (one park mapped as two ways is one AOI), then unnamed ones."""
        from shapely.geometry import Polygon
        from shapely.ops import unary_union
        from shapely.validation import make_valid

        a = self.pack.areas
        rows = self.pack.area_rows
        polys: dict[int, list] = {}
        starts = a["ring_start"]
        current: dict[int, int] = {}
        rings: dict[int, list[tuple[list, list]]] = {}
        for r in range(len(starts) - 1):
            owner = int(a["ring_area"][r])
            lons, lats = a["lon"][starts[r] : starts[r + 1]].tolist(), a["lat"][starts[r] : starts[r + 1]].tolist()
            pts = list(zip(lons, lats, strict=True))
            if a["ring_outer"][r]:
                rings.setdefault(owner, []).append((pts, []))
                current[owner] = len(rings[owner]) - 1
            elif owner in current:  # inner rings follow their outer ring in the pack
                rings[owner][current[owner]][1].append(pts)
        for owner, parts in rings.items():
            ps = []
            for outer, inners in parts:
                p = Polygon(outer, inners)
                ps.append(p if p.is_valid else make_valid(p))
            polys[owner] = ps
        area_addr = {k: v[0] for k, v in self.aoi_addresses.items()}
        groups: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            if i not in polys:
                continue
            key = normalise_name(row[1]) if row[1] else row[0]
            groups.setdefault(key, []).append(i)
        out = []
        for key in sorted(groups):
            idx = groups[key]
            cats = {rows[i][2] for i in idx}
            if len(cats) > 1:  # one name, several land uses: not one AOI
                continue
            geom = unary_union([g for i in idx for g in polys[i]])
            if geom.is_empty or geom.geom_type not in ("Polygon", "MultiPolygon"):
                continue
            rp = geom.representative_point()
            first = rows[idx[0]]
            out.append(
                Aoi(
                    key=key,
                    name=first[1],
                    category=first[2],
                    category_key=first[3],
                    geom=geom,
                    area_m2=float(sum(rows[i][6] for i in idx)),
                    address=area_addr.get(key) if first[1] else None,
                    lat=rp.y,
                    lon=rp.x,
                )
            )
        return out

    @cached_property
    def named_aois(self) -> list[Aoi]:
        return [a for a in self.aois if a.name]

    def unique_name_aoi(self, a: Aoi) -> bool:
        """A named AOI no other AOI shares a name with (parts of one name are merged, so this guards renames)."""
        return bool(a.name) and sum(1 for x in self.named_aois if normalise_name(x.name or "") == a.key) == 1

    @cached_property
    def aoi_by_key(self) -> dict[str, Aoi]:
        return {a.key: a for a in self.aois}

    @cached_property
    def aoi_addresses(self) -> dict[str, list[str]]:
        """normalised AOI name -> every address the gazetteer gives its parts (one park may border two streets)."""
        out: dict[str, set[str]] = {}
        for r in self.pack.rows:
            if r[1] == "area" and r[2] and r[6]:
                out.setdefault(normalise_name(r[2]), set()).add(r[6])
        return {k: sorted(v) for k, v in out.items()}

    def pois_in(self, aoi: Aoi) -> list[Poi]:
        import shapely

        la, lo = self._poi_xy
        mask = shapely.contains_xy(aoi.geom, lo, la)
        return [p for p, m in zip(self.pois, mask, strict=True) if m]

    def aois_containing(self, lat: float, lon: float, named_only: bool = True) -> list[Aoi]:
        import shapely

        return [a for a in (self.named_aois if named_only else self.aois) if shapely.contains_xy(a.geom, lon, lat)]

    # ---- roads --------------------------------------------------------------------------------------------------

    @cached_property
    def _graph(self) -> dict[str, np.ndarray]:
        return self.pack.graph

    @cached_property
    def roads(self) -> list[Road]:
        g = self._graph
        street_len = {}
        for r in self.pack.rows:
            if r[1] == "street":
                street_len[r[2]] = float(json.loads(r[12] or "{}").get("length_m", "nan"))
        names = [str(x) for x in g["names"]]
        by_name: dict[int, list[int]] = {}
        for e, ni in enumerate(g["name"].tolist()):
            if ni >= 0 and names[ni] in street_len:
                by_name.setdefault(ni, []).append(e)
        out = []
        for ni in sorted(by_name, key=lambda k: names[k]):
            edges = by_name[ni]
            nodes = frozenset(int(x) for e in edges for x in (g["src"][e], g["dst"][e]))
            poly = self._main_chain(edges)
            if len(poly) < 2 or not math.isfinite(street_len[names[ni]]):
                continue
            out.append(Road(name=names[ni], nodes=nodes, length_m=street_len[names[ni]], polyline=poly))
        return out

    @cached_property
    def roads_by_name(self) -> dict[str, Road]:
        return {r.name: r for r in self.roads}

    def _main_chain(self, edges: list[int]) -> list[tuple[float, float]]:
        """The longest shortest path (two Dijkstra sweeps) through the largest connected piece of a road."""
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components, dijkstra

        g = self._graph
        pairs = sorted(
            {
                (
                    min(int(g["src"][e]), int(g["dst"][e])),
                    max(int(g["src"][e]), int(g["dst"][e])),
                    float(g["length_m"][e]),
                )
                for e in edges
            }
        )
        nodes = sorted({u for u, v, _ in pairs} | {v for u, v, _ in pairs})
        at = {n: i for i, n in enumerate(nodes)}
        n = len(nodes)
        rows = [at[u] for u, v, _ in pairs]
        cols = [at[v] for u, v, _ in pairs]
        w = [max(x, 1e-3) for _, _, x in pairs]
        m = coo_matrix((w, (rows, cols)), shape=(n, n)).tocsr()
        _, labels = connected_components(m, directed=False)
        keep = int(np.argmax(np.bincount(labels[np.array(rows)], weights=np.array(w))))  # most metres of road
        start = int(np.nonzero(labels == keep)[0][0])
        d0 = dijkstra(m, directed=False, indices=start)
        far = int(np.argmax(np.where(np.isfinite(d0), d0, -1)))
        d1, pred = dijkstra(m, directed=False, indices=far, return_predecessors=True)
        end = int(np.argmax(np.where(np.isfinite(d1), d1, -1)))
        path = [end]
        while path[-1] != far and pred[path[-1]] >= 0:
            path.append(int(pred[path[-1]]))
        return [(float(g["node_lat"][nodes[i]]), float(g["node_lon"][nodes[i]])) for i in path]

    def node_ll(self, node: int) -> tuple[float, float]:
        g = self._graph
        return (float(g["node_lat"][node]), float(g["node_lon"][node]))

    @cached_property
    def road_links(self) -> dict[str, dict[str, list[int]]]:
        """road name -> {other road name: shared graph nodes (sorted)}: where two named roads meet."""
        owners: dict[int, list[str]] = {}
        for r in self.roads:
            for n in r.nodes:
                owners.setdefault(n, []).append(r.name)
        out: dict[str, dict[str, list[int]]] = {r.name: {} for r in self.roads}
        for n in sorted(owners):
            names = sorted(set(owners[n]))
            for a in names:
                for b in names:
                    if a != b:
                        out[a].setdefault(b, []).append(n)
        return out

    def chain_position(self, road: Road, lat: float, lon: float) -> float:
        """Distance along the road's main polyline of the vertex nearest to a point (orders junctions)."""
        best, pos, acc = math.inf, 0.0, 0.0
        prev = None
        for p in road.polyline:
            if prev is not None:
                acc += haversine_m(prev[0], prev[1], p[0], p[1])
            d = haversine_m(lat, lon, p[0], p[1])
            if d < best:
                best, pos = d, acc
            prev = p
        return pos

    # ---- the simplified junction network ------------------------------------------------------------------------

    @cached_property
    def junction_network(self) -> JunctionNetwork:
        from rig.benchmarks.urbangeo.network import JunctionNetwork

        return JunctionNetwork.build(self)
