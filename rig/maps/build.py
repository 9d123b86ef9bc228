"""Build an offline map pack from an OSM extract (the layout is described in rig.maps.pack_format)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rig.maps import profiles
from rig.maps.geo import metres_to_chord, to_xyz
from rig.maps.pack_format import FORMAT_VERSION
from rig.maps.records import MODES, Extent, PackInfo
from rig.maps.text import normalise_name
from rig.records import write_atomic

_STREET_ADDRESS_MAX_M = 100.0  # a POI without address tags borrows the nearest street name within this


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _largest_component(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Nodes of the largest strongly connected component: snapping elsewhere (a clipped one-way stub at the
    extract border, an isolated footway) would make routes fail for no reason a user could see."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    mask = np.zeros(n, dtype=bool)
    if len(src) == 0:
        return mask
    g = coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsr()
    _, labels = connected_components(g, directed=True, connection="strong")
    touched = np.zeros(n, dtype=bool)
    touched[src] = True
    touched[dst] = True
    counts = np.bincount(labels[touched])
    mask[(labels == int(np.argmax(counts))) & touched] = True
    return mask


def _streets(ex) -> list[dict]:
    out = []
    for name, parts in ex.street_parts.items():
        arr = np.array([(p[0], p[1], p[2]) for p in parts])
        w = arr[:, 2] if arr[:, 2].sum() > 0 else np.ones(len(arr))
        c_lat, c_lon = np.average(arr[:, 0], weights=w), np.average(arr[:, 1], weights=w)
        # The segment midpoint closest to the weighted centroid: a point that is really on the street.
        i = int(np.argmin((arr[:, 0] - c_lat) ** 2 + ((arr[:, 1] - c_lon) * np.cos(np.radians(c_lat))) ** 2))
        cls = Counter(p[3] for p in parts).most_common(1)[0][0]
        out.append(
            {
                "kind": "street",
                "name": name,
                "lat": float(arr[i, 0]),
                "lon": float(arr[i, 1]),
                "osm": "s" + normalise_name(name),
                "category_key": "highway",
                "category": cls,
                "address": None,
                "street": name,
                "housenumber": None,
                "city": None,
                "opening_hours": None,
                "extra": {"length_m": f"{arr[:, 2].sum():.0f}"},
            }
        )
    return out


def _fill_addresses(places: list[dict], ex, city: str | None) -> None:
    from scipy.spatial import cKDTree

    named = [i for i, n in enumerate(ex.e_name) if n >= 0]
    src, dst = np.array(ex.e_src), np.array(ex.e_dst)
    lat, lon = np.array(ex.node_lat), np.array(ex.node_lon)
    for p in places:
        if p["kind"] == "street":
            p["address"] = ", ".join(x for x in (p["name"], city) if x)
        p["address_source"] = "tags" if p["address"] else "none"
        if p["city"] is None and p["kind"] != "street":
            p["city"] = city
    if not named:
        return
    idx = np.array(named)
    mid = to_xyz((lat[src[idx]] + lat[dst[idx]]) / 2, (lon[src[idx]] + lon[dst[idx]]) / 2)
    tree = cKDTree(mid)
    todo = [p for p in places if p["kind"] in ("poi", "area") and not p["address"]]
    if not todo:
        return
    d, j = tree.query(
        to_xyz([p["lat"] for p in todo], [p["lon"] for p in todo]),
        distance_upper_bound=metres_to_chord(_STREET_ADDRESS_MAX_M),
    )
    for p, dj, jj in zip(todo, d, j, strict=True):
        if np.isfinite(dj):
            street = ex.names[ex.e_name[named[jj]]]
            p["address"] = ", ".join(x for x in (street, city) if x)
            p["street"] = street
            p["address_source"] = "nearest_street"


_PLACES_SQL = """
CREATE TABLE places (
    id INTEGER PRIMARY KEY, place_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    name_norm TEXT NOT NULL, category TEXT, category_key TEXT, address TEXT, address_source TEXT,
    street TEXT, housenumber TEXT, city TEXT, lat REAL NOT NULL, lon REAL NOT NULL, opening_hours TEXT,
    extra TEXT NOT NULL
);
CREATE INDEX places_name ON places(name_norm);
CREATE INDEX places_category ON places(category);
CREATE TABLE areas (
    id INTEGER PRIMARY KEY, area_id TEXT NOT NULL, name TEXT, category TEXT NOT NULL,
    category_key TEXT NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, area_m2 REAL NOT NULL
);
"""


def _write_gazetteer(path: Path, places: list[dict], areas: list[dict]) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.executescript(_PLACES_SQL)
        con.executemany(
            "INSERT INTO places (place_id, kind, name, name_norm, category, category_key, address, address_source,"
            " street, housenumber, city, lat, lon, opening_hours, extra) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    f"{p['kind']}/{p['osm']}",
                    p["kind"],
                    p["name"],
                    normalise_name(p["name"]),
                    p["category"],
                    p["category_key"],
                    p["address"],
                    p["address_source"],
                    p["street"],
                    p["housenumber"],
                    p["city"],
                    p["lat"],
                    p["lon"],
                    p["opening_hours"],
                    json.dumps(p["extra"], ensure_ascii=False, sort_keys=True),
                )
                for p in places
            ],
        )
        con.executemany(
            "INSERT INTO areas (id, area_id, name, category, category_key, lat, lon, area_m2) VALUES (?,?,?,?,?,?,?,?)",
            [
                (i, f"area/{a['osm']}", a["name"], a["category"], a["category_key"], a["lat"], a["lon"], a["area_m2"])
                for i, a in enumerate(areas)
            ],
        )
        con.commit()
    finally:
        con.close()


def _write_areas(path: Path, areas: list[dict]) -> None:
    lats, lons, starts, owner, outer = [], [], [0], [], []
    for i, a in enumerate(areas):
        for is_outer, rl, rn in a["rings"]:
            lats.append(rl)
            lons.append(rn)
            starts.append(starts[-1] + len(rl))
            owner.append(i)
            outer.append(is_outer)
    np.savez_compressed(
        path,
        lat=np.concatenate(lats) if lats else np.zeros(0),
        lon=np.concatenate(lons) if lons else np.zeros(0),
        ring_start=np.array(starts, dtype=np.int64),
        ring_area=np.array(owner, dtype=np.int32),
        ring_outer=np.array(outer, dtype=bool),
    )


def _area_places(ex) -> list[dict]:
    """The extract's named areas as gazetteer places."""
    return [
        {
            "kind": "area",
            "name": a["name"],
            "lat": a["lat"],
            "lon": a["lon"],
            "osm": a["osm"],
            "category_key": a["category_key"],
            "category": a["category"],
            "address": None,
            "street": None,
            "housenumber": None,
            "city": None,
            "opening_hours": None,
            "extra": {},
        }
        for a in ex.areas
        if a["name"]
    ]


def _write_graph(
    path: Path, ex, src: np.ndarray, dst: np.ndarray, modes: np.ndarray, snap: dict[str, np.ndarray]
) -> None:
    """The routing graph: nodes, edges with their modes, speeds and names, and each mode's snap nodes."""
    np.savez_compressed(
        path,
        node_lat=np.array(ex.node_lat),
        node_lon=np.array(ex.node_lon),
        node_osm=np.array(ex.node_osm, dtype=np.int64),
        src=src,
        dst=dst,
        length_m=np.array(ex.e_len, dtype=np.float32),
        modes=modes,
        flags=np.array(ex.e_flags, dtype=np.uint16),
        name=np.array(ex.e_name, dtype=np.int32),
        cls=np.array(ex.e_class, dtype=np.uint8),
        drive_kmh=np.array(ex.e_drive_kmh, dtype=np.float32),
        walk_mps=np.array(ex.e_walk_mps, dtype=np.float32),
        bike_mps=np.array(ex.e_bike_mps, dtype=np.float32),
        way=np.array(ex.e_way, dtype=np.int64),
        names=np.array(ex.names or [""], dtype=str),
        classes=np.array(ex.classes or [""], dtype=str),
        # one array per mode in MODES, named so that a ** dict cannot be taken for allow_pickle
        snap_walk=snap["walk"],
        snap_bike=snap["bike"],
        snap_drive=snap["drive"],
    )


def build_pack(pbf_path: str | Path, out_dir: str | Path) -> PackInfo:
    """Parse an .osm.pbf extract and write a map pack directory; returns its PackInfo."""
    from importlib.metadata import version

    from rig.maps.osm import read_extract

    t0 = time.perf_counter()
    pbf_path, out = Path(pbf_path), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pack.json").unlink(missing_ok=True)  # pack.json is written last: its presence marks a whole pack
    ex = read_extract(str(pbf_path))
    if not ex.node_osm:
        raise ValueError(f"{pbf_path.name}: no routable ways found")

    n = len(ex.node_osm)
    src, dst = np.array(ex.e_src, dtype=np.int32), np.array(ex.e_dst, dtype=np.int32)
    modes = np.array(ex.e_modes, dtype=np.uint8)
    snap = {
        m: _largest_component(n, src[(modes & profiles.MODE_BITS[m]) > 0], dst[(modes & profiles.MODE_BITS[m]) > 0])
        for m in MODES
    }
    city = ex.cities.most_common(1)[0][0] if ex.cities else None
    places = [p for p in ex.places] + _streets(ex)
    places += _area_places(ex)
    _fill_addresses(places, ex, city)

    _write_graph(out / "graph.npz", ex, src, dst, modes, snap)
    _write_areas(out / "areas.npz", ex.areas)
    _write_gazetteer(out / "gazetteer.sqlite", places, ex.areas)

    lat_all = np.array(ex.node_lat + [p["lat"] for p in places])
    lon_all = np.array(ex.node_lon + [p["lon"] for p in places])
    kinds = Counter(p["kind"] for p in places)
    info = PackInfo(
        format_version=FORMAT_VERSION,
        source_file=pbf_path.name,
        source_sha256=file_sha256(pbf_path),
        built_at=datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        build_seconds=round(time.perf_counter() - t0, 3),
        # The key names the pack format, not a module: cached packs built before the module was renamed match.
        builder={
            "rig.maps.pack": str(FORMAT_VERSION),
            "osmium": version("osmium"),
            "numpy": version("numpy"),
            "scipy": version("scipy"),
        },
        city=city,
        extent=Extent(
            min_lat=float(lat_all.min()),
            min_lon=float(lon_all.min()),
            max_lat=float(lat_all.max()),
            max_lon=float(lon_all.max()),
        ),
        counts={
            "nodes": n,
            "edges": len(src),
            "pois": kinds["poi"],
            "streets": kinds["street"],
            "named_areas": kinds["area"],
            "addresses": kinds["address"],
            "areas": len(ex.areas),
            "charging_stations": sum(1 for p in places if p["category"] == "charging_station"),
            "oneway_drive_ways": ex.oneway_ways,
            **{f"{m}_edges": int(((modes & profiles.MODE_BITS[m]) > 0).sum()) for m in MODES},
            **{f"{m}_snap_nodes": int(snap[m].sum()) for m in MODES},
        },
    )
    write_atomic(out / "pack.json", info.model_dump_json(indent=2) + "\n")
    return info
