"""One streaming pass over an OSM extract (pyosmium) that collects everything a map pack needs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rig.maps import profiles
from rig.maps.geo import haversine_m, ring_area_m2

# Tag keys that make a named object a POI, most telling first (the first present names its category).
POI_KEYS = (
    "amenity",
    "shop",
    "tourism",
    "leisure",
    "historic",
    "office",
    "craft",
    "healthcare",
    "railway",
    "public_transport",
    "aeroway",
    "highway",
    "place",
    "natural",
    "man_made",
    "building",
)
_POI_HIGHWAY = {"bus_stop", "platform"}
_POI_RAILWAY = {"station", "halt", "tram_stop", "subway_entrance"}
AREA_KEYS = ("landuse", "leisure", "natural")
EXTRA_KEYS = (
    "cuisine",
    "operator",
    "brand",
    "capacity",
    "wheelchair",
    "level",
    "ref",
    "website",
    "phone",
    "fee",
    "parking",
    "network",
    "toll",
)


@dataclass
class Extract:
    node_osm: list[int] = field(default_factory=list)
    node_lat: list[float] = field(default_factory=list)
    node_lon: list[float] = field(default_factory=list)
    node_index: dict[int, int] = field(default_factory=dict)
    # Directed edges, one row per direction that some mode may travel.
    e_src: list[int] = field(default_factory=list)
    e_dst: list[int] = field(default_factory=list)
    e_len: list[float] = field(default_factory=list)
    e_modes: list[int] = field(default_factory=list)
    e_flags: list[int] = field(default_factory=list)
    e_name: list[int] = field(default_factory=list)  # index into names, -1 unnamed
    e_class: list[int] = field(default_factory=list)  # index into classes
    e_drive_kmh: list[float] = field(default_factory=list)
    e_walk_mps: list[float] = field(default_factory=list)
    e_bike_mps: list[float] = field(default_factory=list)
    e_way: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    name_index: dict[str, int] = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)
    class_index: dict[str, int] = field(default_factory=dict)
    places: list[dict[str, Any]] = field(default_factory=list)
    areas: list[dict[str, Any]] = field(default_factory=list)  # meta + "rings": [(is_outer, lats, lons)]
    street_parts: dict[str, list[tuple[float, float, float, str]]] = field(default_factory=dict)
    cities: Counter = field(default_factory=Counter)
    oneway_ways: int = 0

    def intern(self, table: list[str], index: dict[str, int], value: str) -> int:
        i = index.get(value)
        if i is None:
            i = index[value] = len(table)
            table.append(value)
        return i

    def node(self, ref: int, lat: float, lon: float) -> int:
        i = self.node_index.get(ref)
        if i is None:
            i = self.node_index[ref] = len(self.node_osm)
            self.node_osm.append(ref)
            self.node_lat.append(lat)
            self.node_lon.append(lon)
        return i


def _category(tags: Any) -> tuple[str, str] | None:
    for key in POI_KEYS:
        value = tags.get(key)
        if value is None or value == "no":
            continue
        if key == "highway" and value not in _POI_HIGHWAY:
            continue
        if key == "railway" and value not in _POI_RAILWAY:
            continue
        return key, value
    return None


def _address(tags: Any) -> dict[str, str]:
    out = {}
    for k in ("street", "housenumber", "postcode", "city"):
        v = tags.get("addr:" + k)
        if v:
            out[k] = v
    if "street" not in out and tags.get("addr:place"):
        out["street"] = tags.get("addr:place")
    return out


def format_address(parts: dict[str, str]) -> str | None:
    street = " ".join(p for p in (parts.get("street"), parts.get("housenumber")) if p)
    town = " ".join(p for p in (parts.get("postcode"), parts.get("city")) if p)
    text = ", ".join(p for p in (street, town) if p)
    return text or None


def _extra(tags: Any) -> dict[str, str]:
    out = {k: tags.get(k) for k in EXTRA_KEYS if tags.get(k)}
    for k, v in tags.items():
        if k.startswith(("socket:", "charging_station:")):
            out[k] = v
    return out


def _tags(taglist: Any) -> dict[str, str]:
    return {t.k: t.v for t in taglist}


def _ring_centroid(lats: np.ndarray, lons: np.ndarray) -> tuple[float, float, float]:
    """Area-weighted centroid in local planar coordinates; falls back to the vertex mean for slivers."""
    x, y = lons, lats
    cross = x * np.roll(y, -1) - np.roll(x, -1) * y
    a = cross.sum() / 2
    if abs(a) < 1e-14:
        return float(np.mean(lats)), float(np.mean(lons)), 0.0
    cx = ((x + np.roll(x, -1)) * cross).sum() / (6 * a)
    cy = ((y + np.roll(y, -1)) * cross).sum() / (6 * a)
    return float(cy), float(cx), abs(float(a))


class _Collector:
    def __init__(self) -> None:
        self.ex = Extract()

    def place(
        self, kind: str, name: str, lat: float, lon: float, osm: str, tags: Any, category: tuple[str, str] | None
    ) -> None:
        addr = _address(tags)
        if addr.get("city"):
            self.ex.cities[addr["city"]] += 1
        self.ex.places.append(
            {
                "kind": kind,
                "name": name,
                "lat": lat,
                "lon": lon,
                "osm": osm,
                "category_key": category[0] if category else None,
                "category": category[1] if category else None,
                "address": format_address(addr),
                "street": addr.get("street"),
                "housenumber": addr.get("housenumber"),
                "city": addr.get("city"),
                "opening_hours": tags.get("opening_hours"),
                "extra": _extra(tags),
            }
        )

    def feature(self, tags: Any, lat: float, lon: float, osm: str) -> None:
        """POI and/or address point for a node or an area's centroid."""
        name = tags.get("name")
        cat = _category(tags)
        charging = tags.get("amenity") == "charging_station"
        if (name and cat) or charging:
            self.place("poi", name or tags.get("operator") or "Charging station", lat, lon, osm, tags, cat)
        addr = _address(tags)
        if addr.get("street") and addr.get("housenumber"):
            self.place("address", f"{addr['street']} {addr['housenumber']}", lat, lon, osm, tags, None)

    def on_node(self, o: Any) -> None:
        if len(o.tags) and o.location.valid():
            self.feature(_tags(o.tags), o.location.lat, o.location.lon, f"n{o.id}")

    def on_way(self, o: Any) -> None:
        if "highway" not in o.tags and "route" not in o.tags:
            return
        tags = _tags(o.tags)
        modes = profiles.way_modes(tags)
        if modes is None:
            return
        ex = self.ex
        fwd, bwd = modes
        if bool(fwd & profiles.DRIVE) != bool(bwd & profiles.DRIVE):
            ex.oneway_ways += 1
        flags = profiles.way_flags(tags)
        name = tags.get("name") or tags.get("ref")
        name_i = ex.intern(ex.names, ex.name_index, name) if name else -1
        cls = tags.get("highway") or ("ferry" if tags.get("route") == "ferry" else "other")
        cls_i = ex.intern(ex.classes, ex.class_index, cls)
        kmh = profiles.drive_kmh(tags)
        walk_mps, bike_mps = profiles.walk_bike_mps(tags)
        prev = None
        for nd in o.nodes:
            loc = nd.location
            if not loc.valid():  # clipped at the extract's border
                prev = None
                continue
            cur = (ex.node(nd.ref, loc.lat, loc.lon), loc.lat, loc.lon)
            if prev is not None and prev[0] != cur[0]:
                length = haversine_m(prev[1], prev[2], cur[1], cur[2])
                for a, b, m in ((prev[0], cur[0], fwd), (cur[0], prev[0], bwd)):
                    if m:
                        ex.e_src.append(a)
                        ex.e_dst.append(b)
                        ex.e_len.append(length)
                        ex.e_modes.append(m)
                        ex.e_flags.append(flags)
                        ex.e_name.append(name_i)
                        ex.e_class.append(cls_i)
                        ex.e_drive_kmh.append(kmh)
                        ex.e_walk_mps.append(walk_mps)
                        ex.e_bike_mps.append(bike_mps)
                        ex.e_way.append(o.id)
                if (name := tags.get("name")) and tags.get("highway"):
                    ex.street_parts.setdefault(name, []).append(
                        ((prev[1] + cur[1]) / 2, (prev[2] + cur[2]) / 2, length, cls)
                    )
            prev = cur

    def on_area(self, o: Any) -> None:
        if not len(o.tags):
            return
        tags = _tags(o.tags)
        rings = []
        for outer in o.outer_rings():
            pts = [(n.lat, n.lon) for n in outer if n.location.valid()]
            if len(pts) >= 3:
                rings.append((True, np.array([p[0] for p in pts]), np.array([p[1] for p in pts])))
            for inner in o.inner_rings(outer):
                pts = [(n.lat, n.lon) for n in inner if n.location.valid()]
                if len(pts) >= 3:
                    rings.append((False, np.array([p[0] for p in pts]), np.array([p[1] for p in pts])))
        outers = [r for r in rings if r[0]]
        if not outers:
            return
        # Centroid of the largest outer ring keeps multipolygon centroids inside some part of the area.
        lat, lon, _ = max((_ring_centroid(r[1], r[2]) for r in outers), key=lambda c: c[2])
        osm = f"{'w' if o.from_way() else 'r'}{o.orig_id()}"
        if not tags.get("highway"):  # a pedestrian square is a street, not a POI
            self.feature(tags, lat, lon, osm)
        area_key = next((k for k in AREA_KEYS if tags.get(k)), None)
        if area_key:
            area_m2 = sum(ring_area_m2(r[1], r[2]) * (1 if r[0] else -1) for r in rings)
            self.ex.areas.append(
                {
                    "osm": osm,
                    "name": tags.get("name"),
                    "category_key": area_key,
                    "category": tags.get(area_key),
                    "lat": lat,
                    "lon": lon,
                    "area_m2": max(area_m2, 0.0),
                    "rings": rings,
                }
            )


def read_extract(pbf_path: str) -> Extract:
    import osmium  # imported here: only pack building needs it

    col = _Collector()
    for o in osmium.FileProcessor(str(pbf_path)).with_locations().with_areas():
        if isinstance(o, osmium.osm.Changeset):  # not map data (and has no is_area)
            continue
        if o.is_area():
            col.on_area(o)
        elif o.is_node():
            col.on_node(o)
        elif o.is_way():
            col.on_way(o)
    return col.ex
