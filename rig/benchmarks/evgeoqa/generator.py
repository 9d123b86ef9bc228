"""Generate EVGeoQA queries over a map pack (paper sec. 3): stations, POIs, user locations, questions, ground truth.

1. Stations: every ``amenity=charging_station`` of the pack. POIs: what Search_Nearby_POI shows at a station's
   coordinate (the nearest ``poi_cap`` POIs within the walking radius, transit stops and map furniture left out), the
   same list the upstream data keeps per station.
2. User locations: the paper clusters heatmap pixels into density tiers (K-Means), weights tiers, and samples a tier
   by softmax (sec. 3.3, A.1). OSM has no population heatmap, so: candidates are the nodes of the drive network (the
   "road contour" part: a driver is on a road); each gets a density score, the number of address points and POIs
   within half the search radius (buildings and activity as the population proxy); a 1-D K-Means splits the scores
   into K tiers; tier k is drawn with P(k) = softmax(w_k), w_k = 2 * (centroid_k - min) / (max - min); a node is
   drawn within the tier with weight 2 on major roads (primary ... tertiary, trunk, motorway) and 1 elsewhere.
3. Queries: every location x every intent with at least one valid station; a template is drawn per query.
4. Ground truth (sec. 3.5): the valid stations (a POI of the intent among the station's POIs), ranked by driving
   distance from the user on the drive graph (ties by station id), the first ``gt_size``. The tier distance is the
   geodesic distance to the first of them (sec. 5.2).
Deterministic for a pack, a seed and the options.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rig.benchmarks.evgeoqa.data import (
    INTENT_BY_ID,
    INTENT_TEMPLATES,
    INTENTS,
    SEED_TEMPLATES,
    AnswerStation,
    Dataset,
    Intent,
    Query,
    Setting,
    Station,
    extent_diag_m,
    round_m,
)
from rig.benchmarks.evgeoqa.world import NoRoute, PackWorld, PoiHit
from rig.maps.geo import geodesic_m, haversine_m, metres_to_chord, to_xyz
from rig.maps.profiles import MODE_BITS

GENERATOR_VERSION = "1"
K_TIERS = 4
MAJOR_ROADS = {
    "motorway",
    "motorway_link",
    "trunk",
    "trunk_link",
    "primary",
    "primary_link",
    "secondary",
    "secondary_link",
    "tertiary",
    "tertiary_link",
}
PHRASINGS = ("intent", "seed", "mixed")


class GenerationError(ValueError):
    """The pack cannot give any query (no stations, no valid station for any intent)."""


def setting_for(
    pack,
    search_radius_m: float | None = None,
    walk_radius_m: float | None = None,
    poi_cap: int | None = None,
    gt_size: int | None = None,
) -> Setting:
    e = pack.info.extent
    kw: dict[str, Any] = {}
    if poi_cap is not None:
        kw["poi_cap"] = poi_cap
    if gt_size is not None:
        kw["gt_size"] = gt_size
    return Setting.scaled(
        extent_diag_m(e.min_lat, e.min_lon, e.max_lat, e.max_lon), search_radius_m, walk_radius_m, **kw
    )


def station_pois(world: PackWorld) -> dict[str, list[PoiHit]]:
    return {s.station_id: world.pois_near(s.lat, s.lon) for s in world.stations}


def kmeans_1d(values: np.ndarray, k: int, iters: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Labels and centroids (ascending) of a 1-D K-Means; deterministic (centroids start at quantiles)."""
    uniq = np.unique(values)
    k = max(1, min(k, len(uniq)))
    cent = np.quantile(values, (np.arange(k) + 0.5) / k)
    labels = np.zeros(len(values), dtype=int)
    for _ in range(iters):
        labels = np.argmin(np.abs(values[:, None] - cent[None, :]), axis=1)
        new = np.array([values[labels == j].mean() if np.any(labels == j) else cent[j] for j in range(k)])
        if np.allclose(new, cent):
            break
        cent = new
    order = np.argsort(cent)
    remap = np.empty(k, dtype=int)
    remap[order] = np.arange(k)
    return remap[labels], cent[order]


def sample_locations(
    pack, n: int, rng: np.random.Generator, setting: Setting, k: int = K_TIERS
) -> list[dict[str, Any]]:
    """``n`` distinct drive-network nodes drawn by density tier and road class (see the module docstring)."""
    from scipy.spatial import cKDTree

    g = pack.graph  # the pack's node table
    nodes = np.nonzero(g["snap_drive"])[0]
    if len(nodes) == 0:
        raise GenerationError("the map pack has no drive network to place users on")
    lat, lon = g["node_lat"][nodes].astype(float), g["node_lon"][nodes].astype(float)
    people = np.isin(pack.kind, ("address", "poi"))
    tree = cKDTree(to_xyz(pack.lat[people], pack.lon[people]))
    r = metres_to_chord(setting.search_radius_m / 2)
    density = np.array([len(x) for x in tree.query_ball_point(to_xyz(lat, lon), r)], dtype=float)
    labels, cent = kmeans_1d(np.log1p(density), k)
    span = float(cent[-1] - cent[0])
    w = 2 * (cent - cent[0]) / span if span > 0 else np.zeros(len(cent))
    p_tier = np.exp(w) / np.exp(w).sum()
    # Road class per node: the best class among the drive edges that touch it.
    classes = [str(c) for c in g["classes"]]
    major_cls = np.array([c in MAJOR_ROADS for c in classes])
    drive = (g["modes"] & MODE_BITS["drive"]) != 0
    major_node = np.zeros(len(g["node_lat"]), dtype=bool)
    hit = drive & major_cls[g["cls"]]
    major_node[g["src"][hit]] = True
    major_node[g["dst"][hit]] = True
    road_w = np.where(major_node[nodes], 2.0, 1.0)
    taken = np.zeros(len(nodes), dtype=bool)
    out: list[dict[str, Any]] = []
    while len(out) < min(n, len(nodes)):
        avail = np.array([np.any((labels == j) & ~taken) for j in range(len(cent))])
        pk = p_tier * avail
        tier = int(rng.choice(len(cent), p=pk / pk.sum()))
        cand = np.nonzero((labels == tier) & ~taken)[0]
        wts = road_w[cand]
        i = int(rng.choice(cand, p=wts / wts.sum()))
        taken[i] = True
        out.append(
            {
                "lat": round(float(lat[i]), 7),
                "lon": round(float(lon[i]), 7),
                "node": int(nodes[i]),
                "tier": tier,
                "density": int(density[i]),
                "major_road": bool(major_node[nodes[i]]),
            }
        )
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "pack"


def question_for(intent: Intent, rng: np.random.Generator, phrasing: str) -> tuple[str, str]:
    use_seed = phrasing == "seed" or (phrasing == "mixed" and rng.random() < 0.5)
    if use_seed:
        i = int(rng.integers(len(SEED_TEMPLATES)))
        return SEED_TEMPLATES[i].format(place=intent.place), f"seed{i}"
    i = int(rng.integers(len(INTENT_TEMPLATES)))
    a = intent.activities[int(rng.integers(len(intent.activities)))]
    return INTENT_TEMPLATES[i].format(activity=a), f"intent{i}"


def generate(
    pack,
    *,
    seed: int = 0,
    locations: int = 24,
    setting: Setting | None = None,
    phrasing: str = "intent",
    skip_trivial: bool = True,
    intents: list[str] | None = None,
    city: str | None = None,
) -> Dataset:
    if phrasing not in PHRASINGS:
        raise GenerationError(f"phrasing {phrasing!r} is not one of {', '.join(PHRASINGS)}")
    setting = setting or setting_for(pack)
    world = PackWorld(pack, setting)
    city = city or world.city
    if not world.stations:
        raise GenerationError("the map pack has no charging stations (amenity=charging_station)")
    chosen = INTENTS if not intents else [INTENT_BY_ID[i] for i in intents]
    pois = station_pois(world)
    valid: dict[str, list[tuple[str, list[PoiHit]]]] = {}
    for it in chosen:
        want = set(it.categories)
        valid[it.id] = [(sid, hits) for sid, ps in pois.items() if (hits := [p for p in ps if p.categories & want])]
    notes = [f"{len(world.stations)} charging stations in the pack"]
    rng = np.random.default_rng(seed)
    locs = sample_locations(pack, locations, rng, setting)
    queries: list[Query] = []
    skipped_trivial = no_route = 0
    by_id = {s.station_id: s for s in world.stations}
    for li, loc in enumerate(locs):
        user = (loc["lat"], loc["lon"])
        drive, unrouted = _drive_m(world, user)
        no_route += unrouted
        rev = pack.reverse_geocode(*user)
        where = rev.address or rev.street or city
        for it in chosen:
            cands = [(sid, hits) for sid, hits in valid[it.id] if sid in drive]
            if not cands:
                continue
            if skip_trivial and len(valid[it.id]) == len(world.stations):
                skipped_trivial += 1
                continue
            cands.sort(key=lambda c: (drive[c[0]], c[0]))
            answers = [_answer(by_id[sid], hits, drive[sid], user) for sid, hits in cands[: setting.gt_size]]
            question, template = question_for(it, rng, phrasing)
            reach = any(haversine_m(user[0], user[1], a.lat, a.lon) <= setting.search_radius_m for a in answers)
            queries.append(
                Query(
                    id=f"{_slug(city)}-{li:03d}-{it.id}",
                    city=city,
                    question=question,
                    location_text=where,
                    lat=user[0],
                    lon=user[1],
                    intent=it.id,
                    categories=list(it.categories),
                    template=template,
                    answers=answers,
                    tier_distance_m=answers[0].geodesic_m,
                    reachable=reach,
                )
            )
    usable = [it.id for it in chosen if valid[it.id]]
    notes.append(f"intents with a valid station: {len(usable)} of {len(chosen)} ({', '.join(usable) or 'none'})")
    if skipped_trivial:
        notes.append(
            f"{skipped_trivial} queries skipped: every station of the pack is valid for their intent "
            "(any station would be a hit)"
        )
    if no_route:
        notes.append(f"{no_route} (location, station) pairs without a driving route were left out")
    if not queries:
        raise GenerationError("no query could be generated: " + "; ".join(notes))
    return Dataset(city=city, setting=setting, stations=world.stations, queries=queries, notes=notes)


def _drive_m(world: PackWorld, user: tuple[float, float]) -> tuple[dict[str, float], int]:
    """The driving distance from the user to each station it can reach, and how many it cannot."""
    drive: dict[str, float] = {}
    no_route = 0
    for s in world.stations:
        try:
            drive[s.station_id] = world.distance(user, (s.lat, s.lon))
        except NoRoute:
            no_route += 1
    return drive, no_route


def _answer(s: Station, hits: list[PoiHit], drive_m: float, user: tuple[float, float]) -> AnswerStation:
    return AnswerStation(
        station_id=s.station_id,
        name=s.name,
        lat=s.lat,
        lon=s.lon,
        drive_m=round_m(drive_m),
        geodesic_m=round_m(geodesic_m(user[0], user[1], s.lat, s.lon)),
        poi_keys=[p.key for p in hits],
        poi_names=[p.name for p in hits],
    )
