"""MapPack: the queries an agent's map tools need, answered from a built pack."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rig.maps.geo import geodesic_m, haversine_m, haversine_many_m, metres_to_chord, point_in_ring, to_xyz
from rig.maps.pack_format import read_info
from rig.maps.records import Area, DistanceResult, GeocodeResult, NearbyResult, Place, ReverseGeocodeResult, Route
from rig.maps.text import normalise_name

FUZZY_MIN_SCORE = 80.0  # rapidfuzz WRatio below this is noise for place names
REVERSE_MAX_M = 250.0  # farther than this from any address or POI, reverse geocoding names only the street
_KIND_RANK = {"poi": 0, "area": 1, "street": 2, "address": 3}
# Transit stops share names with the places they serve ("Stockmann" the store vs the bus stop): rank them after.
_MINOR = {"bus_stop", "tram_stop", "stop_position", "platform", "subway_entrance", "halt", "stop_area"}
_SAME_PLACE_M = 200.0  # equal name and category this close: one place mapped several times (stop poles)
_PLACE_COLS = (
    "place_id",
    "kind",
    "name",
    "name_norm",
    "category",
    "category_key",
    "address",
    "address_source",
    "city",
    "lat",
    "lon",
    "opening_hours",
    "extra",
    "street",
    "housenumber",
)


class MapPack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.info = read_info(root)
        con = sqlite3.connect(f"file:{root / 'gazetteer.sqlite'}?mode=ro", uri=True)
        try:
            rows = con.execute(f"SELECT {', '.join(_PLACE_COLS)} FROM places ORDER BY id").fetchall()
            # (area_id, name, category, category_key, lat, lon, area_m2) per named area, in id order
            self.area_rows = con.execute(
                "SELECT area_id, name, category, category_key, lat, lon, area_m2 FROM areas ORDER BY id"
            ).fetchall()
        finally:
            con.close()
        self.rows = rows  # the gazetteer's places, columns as _PLACE_COLS, row i is place i
        self.lat = np.array([r[9] for r in rows], dtype=np.float64)
        self.lon = np.array([r[10] for r in rows], dtype=np.float64)
        self.kind = np.array([r[1] for r in rows], dtype=object)
        self.names_norm = [r[3] for r in rows]
        # KD-trees per (kinds, tagged_address), built on first use.
        self._trees: dict[tuple[tuple[str, ...], bool], tuple[Any, np.ndarray]] = {}

    @classmethod
    def open(cls, pack_dir: str | Path) -> MapPack:
        return cls(Path(pack_dir))

    # -- lazy indexes -------------------------------------------------------------------------------

    @cached_property
    def graph(self) -> dict[str, np.ndarray]:
        """graph.npz's arrays (node coordinates, edges with their lengths, modes and speeds, street names): what
        the router, EVGeoQA's generator and UrbanGeoEval's world read."""
        with np.load(self.root / "graph.npz", allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    @cached_property
    def router(self):
        from rig.maps.routing import Router

        return Router(self.graph)

    @cached_property
    def _exact(self) -> dict[str, list[int]]:
        index: dict[str, list[int]] = {}
        for i, n in enumerate(self.names_norm):
            index.setdefault(n, []).append(i)
        return index

    @cached_property
    def _unique_names(self) -> list[str]:
        return list(self._exact)

    def _tree(self, kinds: tuple[str, ...], tagged_address: bool = False) -> tuple[Any, np.ndarray]:
        """KD-tree over places of some kinds (optionally only those with an address from OSM tags)."""
        from scipy.spatial import cKDTree

        key = (kinds, tagged_address)
        if key not in self._trees:
            mask = np.isin(self.kind, kinds)
            if tagged_address:
                mask &= np.array([r[7] == "tags" for r in self.rows], dtype=bool)
            idx = np.nonzero(mask)[0]
            tree = cKDTree(to_xyz(self.lat[idx], self.lon[idx])) if len(idx) else None
            self._trees[key] = (tree, idx)
        return self._trees[key]

    def _nearest(
        self, lat: float, lon: float, max_m: float, kinds: tuple[str, ...], tagged_address: bool = False
    ) -> tuple[Place | None, float | None]:
        tree, idx = self._tree(kinds, tagged_address)
        if tree is None:
            return None, None
        chord, j = tree.query(to_xyz([lat], [lon])[0], distance_upper_bound=metres_to_chord(max_m))
        if not np.isfinite(chord):
            return None, None
        p = self.place(int(idx[j]))
        return p, round(haversine_m(lat, lon, p.lat, p.lon), 2)

    @cached_property
    def areas(self) -> dict[str, np.ndarray]:
        """areas.npz's polygon rings, with each ring's bounding box (``bb``)."""
        with np.load(self.root / "areas.npz", allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
        starts = a["ring_start"][:-1]
        if len(starts):  # per-ring bounding boxes, so a point query tests few rings in Python
            a["bb"] = np.column_stack(
                [
                    np.minimum.reduceat(a["lat"], starts),
                    np.maximum.reduceat(a["lat"], starts),
                    np.minimum.reduceat(a["lon"], starts),
                    np.maximum.reduceat(a["lon"], starts),
                ]
            )
        else:
            a["bb"] = np.zeros((0, 4))
        return a

    def place(self, i: int) -> Place:
        r = self.rows[i]
        return Place(
            place_id=r[0],
            kind=r[1],
            name=r[2],
            category=r[4],
            category_key=r[5],
            address=r[6],
            address_source=r[7] or "none",
            city=r[8],
            lat=r[9],
            lon=r[10],
            opening_hours=r[11],
            extra=json.loads(r[12]),
            street=r[13],
            housenumber=r[14],
        )

    # -- queries ------------------------------------------------------------------------------------

    @cached_property
    def _cities(self) -> set[str]:
        return {normalise_name(c) for c in {self.info.city, *(r[8] for r in self.rows)} if c}

    def city_ok(self, city: str | None) -> bool:
        """Whether ``city`` (None: any) names this pack's city or one of its places' cities: geocode's gate."""
        if city is None:
            return True
        want = normalise_name(city)
        return any(want == k or want in k or k in want for k in self._cities)

    def geocode(
        self, text: str, city: str | None = None, limit: int = 5, min_score: float = FUZZY_MIN_SCORE
    ) -> list[GeocodeResult]:
        """Exact normalised-name matches first (POIs before areas, streets, addresses), then rapidfuzz WRatio."""
        from rapidfuzz import fuzz, process

        q = normalise_name(text)
        if not q or limit <= 0 or not self.city_ok(city):
            return []
        out: list[GeocodeResult] = []
        for i in sorted(self._exact.get(q, []), key=self._rank):
            self._add(out, i, 100.0, "exact", limit)
        if len(out) < limit:
            hits = process.extract(
                q, self._unique_names, scorer=fuzz.WRatio, processor=None, score_cutoff=min_score, limit=limit * 3
            )
            ranked: list[tuple[int, float, float, tuple[int, int, int], float, int]] = []
            for name, score, _ in hits:
                if name == q:
                    continue
                # Prefer full-string similarity among equal WRatio scores (WRatio saturates on substrings).
                ranked.extend(
                    (self._rank(i)[1], -score, -fuzz.ratio(q, name), self._rank(i), score, i) for i in self._exact[name]
                )
            for *_, score, i in sorted(ranked):
                self._add(out, i, round(float(score), 2), "fuzzy", limit)
        return out

    def _rank(self, i: int) -> tuple[int, int, int]:
        return (_KIND_RANK[self.kind[i]], self.rows[i][4] in _MINOR, i)

    def _add(
        self, out: list[GeocodeResult], i: int, score: float, match: Literal["exact", "fuzzy"], limit: int
    ) -> None:
        if len(out) >= limit:
            return
        r = self.rows[i]
        for prev in out:
            if (
                prev.name == r[2]
                and prev.category == r[4]
                and haversine_m(prev.lat, prev.lon, r[9], r[10]) < _SAME_PLACE_M
            ):
                return
        out.append(GeocodeResult(**self.place(i).model_dump(), score=score, match=match))

    def nearby(
        self,
        lat: float,
        lon: float,
        radius_m: float,
        category: str | None = None,
        keyword: str | None = None,
        limit: int = 20,
    ) -> list[NearbyResult]:
        """POIs within radius_m (great-circle), nearest first; category matches the OSM value, key or key=value."""
        tree, idx = self._tree(("poi",))
        if tree is None or limit <= 0:
            return []
        cand = idx[tree.query_ball_point(to_xyz([lat], [lon])[0], metres_to_chord(radius_m))]
        if len(cand) == 0:
            return []
        d = haversine_many_m(lat, lon, self.lat[cand], self.lon[cand])
        cat = normalise_name(category) if category else None
        kw = normalise_name(keyword) if keyword else None
        out: list[NearbyResult] = []
        for j in np.argsort(d, kind="stable"):
            if d[j] > radius_m:
                break
            r = self.rows[int(cand[j])]
            if cat and cat not in {
                normalise_name(r[4] or ""),
                normalise_name(r[5] or ""),
                normalise_name(f"{r[5]}={r[4]}"),
            }:
                continue
            if (
                kw
                and kw not in r[3]
                and kw not in normalise_name(r[4] or "")
                and kw not in normalise_name(json.loads(r[12]).get("cuisine", ""))
            ):
                continue
            out.append(NearbyResult(**self.place(int(cand[j])).model_dump(), distance_m=round(float(d[j]), 2)))
            if len(out) >= limit:
                break
        return out

    def stations(self, lat: float, lon: float, radius_m: float = 5_000.0, limit: int = 50) -> list[NearbyResult]:
        """EV charging stations (amenity=charging_station) within radius_m, nearest first."""
        return self.nearby(lat, lon, radius_m, category="charging_station", limit=limit)

    def areas_at(self, lat: float, lon: float) -> list[Area]:
        """Land-use areas whose polygon contains the point (outer rings minus holes), smallest first."""
        a = self.areas
        in_outer: set[int] = set()
        in_hole: set[int] = set()
        starts, bb = a["ring_start"], a["bb"]
        hit = (bb[:, 0] <= lat) & (lat <= bb[:, 1]) & (bb[:, 2] <= lon) & (lon <= bb[:, 3])
        for r in np.nonzero(hit)[0]:
            s, e = starts[r], starts[r + 1]
            if point_in_ring(lat, lon, a["lat"][s:e], a["lon"][s:e]):
                (in_outer if a["ring_outer"][r] else in_hole).add(int(a["ring_area"][r]))
        rows = [self.area_rows[i] for i in in_outer - in_hole]
        rows.sort(key=lambda r: r[6])
        return [
            Area(area_id=r[0], name=r[1], category=r[2], category_key=r[3], lat=r[4], lon=r[5], area_m2=r[6])
            for r in rows
        ]

    def reverse_geocode(self, lat: float, lon: float, max_distance_m: float = REVERSE_MAX_M) -> ReverseGeocodeResult:
        """Nearest address point or POI (KD-tree), the nearest named street and the enclosing land-use areas.
        The address text is the nearest address known from OSM tags, else "street, city"."""
        nearest, dist = self._nearest(lat, lon, max_distance_m, ("address", "poi"))
        tagged, _ = self._nearest(lat, lon, max_distance_m, ("address", "poi"), tagged_address=True)
        street = street_d = None
        stree, sidx = self._street_tree
        if stree is not None:
            chord, j = stree.query(to_xyz([lat], [lon])[0], distance_upper_bound=metres_to_chord(max_distance_m))
            if np.isfinite(chord):
                e = int(sidx[j])
                g = self.graph
                street = str(g["names"][g["name"][e]])
                mlat = (g["node_lat"][g["src"][e]] + g["node_lat"][g["dst"][e]]) / 2
                mlon = (g["node_lon"][g["src"][e]] + g["node_lon"][g["dst"][e]]) / 2
                street_d = round(haversine_m(lat, lon, float(mlat), float(mlon)), 2)
        address = tagged.address if tagged else (", ".join(x for x in (street, self.info.city) if x) or None)
        return ReverseGeocodeResult(
            lat=lat,
            lon=lon,
            address=address,
            nearest=nearest,
            distance_m=dist,
            street=street,
            street_distance_m=street_d,
            areas=self.areas_at(lat, lon),
            city=self.info.city,
        )

    @cached_property
    def _street_tree(self):
        from scipy.spatial import cKDTree

        g = self.graph
        idx = np.nonzero(g["name"] >= 0)[0]
        if not len(idx):
            return None, idx
        mlat = (g["node_lat"][g["src"][idx]] + g["node_lat"][g["dst"][idx]]) / 2
        mlon = (g["node_lon"][g["src"][idx]] + g["node_lon"][g["dst"][idx]]) / 2
        return cKDTree(to_xyz(mlat, mlon)), idx

    def route(self, waypoints: list[tuple[float, float]], mode: str = "walk", avoid: Iterable[str] = ()) -> Route:
        """Fastest path through (lat, lon) waypoints; the route is the concatenation of its legs."""
        return self.router.route([(float(a), float(b)) for a, b in waypoints], mode, avoid)

    def distance(
        self, a: tuple[float, float], b: tuple[float, float], kind: str = "great_circle", mode: str = "walk"
    ) -> DistanceResult:
        """Distance between two (lat, lon) points: great_circle (haversine), geodesic (WGS84) or network."""
        if kind == "great_circle":
            return DistanceResult(kind="great_circle", distance_m=round(haversine_m(a[0], a[1], b[0], b[1]), 3))
        if kind == "geodesic":
            return DistanceResult(kind="geodesic", distance_m=round(geodesic_m(a[0], a[1], b[0], b[1]), 3))
        if kind == "network":
            r = self.route([a, b], mode)
            return DistanceResult(kind="network", mode=r.mode, distance_m=r.distance_m, duration_s=r.duration_s)
        raise ValueError(f"unknown distance kind {kind!r}")


def load_pack(pack_dir: str | Path) -> MapPack:
    """Open a built pack; indexes are built lazily on first use."""
    return MapPack.open(pack_dir)
