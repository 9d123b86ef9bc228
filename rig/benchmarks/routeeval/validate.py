"""Validating a generate_running_route call on the offline map: geocode every waypoint, walk through them in
order, measure the distance (paper sec. 3.1 and 3.5, with the map service standing in for Google).

Map answers come through rig.maps.tools.MapService, so a replay store of recorded answers is consulted before a
map pack. A "site" is one pack (or a store alone); a prompt is validated on the first site that covers its city.

Geocoding (our stand-in for a forgiving but location-aware geocoder; README "Geocoding" has the reasoning):
- the address is tried whole, then with trailing comma-separated parts dropped ("Ateneum, Kaivokatu 2, Helsinki"
  -> "Ateneum, Kaivokatu 2" -> "Ateneum"); a prompt pack's aliases map other names to map names first;
- an exact (normalised) name match for any of those texts wins; failing that, the first result whose every name
  word, the city's own words aside, is in the query up to typos ("Kiasma museum" -> Kiasma; "Central Park, New
  York" does not become a Helsinki cafe that shares a word). A waypoint that names only the city is not a place.

Routing: legs on foot between consecutive points, summed (a route is the concatenation of its legs). The paper's
measure (the default) is the route "with all waypoints in sequence", whatever the route type. The `closed` measure
(an option) returns a loop to the start unless the model already ended there and doubles an out-and-back's way out
unless the model already wrote the way back; a point-to-point route is measured as given in both.
"""

from __future__ import annotations

import json
import re
import sqlite3
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rig.maps.geo import haversine_m
from rig.maps.text import normalise_name

METRES_PER_MILE = 1609.344
SAME_POINT_M = 50.0  # a last waypoint this close to the first closes the route already
GEOCODE_LIMIT = 5
_WORD = re.compile(r"\w+")
_TYPO_RATIO = 85.0  # rapidfuzz ratio for one word of a place name to count as present in the query
_CITY_WORD_RATIO = 80.0  # "helsingin" (genitive) is a city word of "Helsinki"


class Geocoded(BaseModel):
    address: str  # as the model wrote it
    query: str  # the text that matched (a prefix of the address, or an alias target)
    name: str
    lat: float
    lon: float
    match: str  # exact | fuzzy | provider (a recorded provider answer, taken as the provider gave it)
    source: str | None = None  # pack | hit | fuzzy (replay store)


class Measurement(BaseModel):
    ok: bool
    error_category: str | None = None  # invalid_waypoint | other
    error: str | None = None
    site: str | None = None
    waypoints: list[Geocoded] = Field(default_factory=list)
    routed: list[tuple[float, float]] = Field(default_factory=list)  # the points walked through, in order
    legs_m: list[float] = Field(default_factory=list)
    closed_by_validator: bool = False  # loop: the start was appended
    doubled: bool = False  # out-and-back: the way out counted twice
    distance_m: float | None = None

    @property
    def miles(self) -> float | None:
        return None if self.distance_m is None else self.distance_m / METRES_PER_MILE


def words(text: str) -> list[str]:
    return _WORD.findall(normalise_name(text))


def _drop_city_words(ws: list[str], city_words: set[str]) -> list[str]:
    from rapidfuzz import fuzz

    return [w for w in ws if not any(w == c or fuzz.ratio(w, c) >= _CITY_WORD_RATIO for c in city_words)]


def name_matches(query: str, name: str, city_words: set[str]) -> bool:
    """Every word of the place name (city words aside) appears in the query, up to typos."""
    from rapidfuzz import fuzz

    q = _drop_city_words(words(query), city_words)
    n = _drop_city_words(words(name), city_words)
    if not q or not n:
        return False
    return all(any(w == v or fuzz.ratio(w, v) >= _TYPO_RATIO for v in q) for w in n)


def address_candidates(address: str) -> list[str]:
    """The address whole, then with trailing comma-separated parts dropped one at a time."""
    parts = [p.strip() for p in address.split(",") if p.strip()]
    return [", ".join(parts[:k]) for k in range(len(parts), 0, -1)]


def store_cities(path: Path, provider: str) -> set[str]:
    """Normalised city arguments of the geocode answers recorded in a replay store (docs/maps.md: an entry's
    ctx_name is the canonical JSON of its arguments without the query)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT DISTINCT ctx_name FROM entries WHERE provider=? AND endpoint='geocode'", (provider,)
        ).fetchall()
    finally:
        con.close()
    out = set()
    for (ctx,) in rows:
        try:
            city = json.loads(ctx).get("city")
        except (ValueError, AttributeError):
            continue
        if isinstance(city, str):
            out.add(normalise_name(city))
    return out


class Site:
    """One source of map answers: a map pack, a replay store, or both (store first)."""

    def __init__(
        self,
        name: str,
        pack: Any | None = None,
        store: Any | None = None,
        provider: str = "rig",
        cities: set[str] | None = None,
    ) -> None:
        from rig.maps.tools import MapService

        self.name, self.pack = name, pack
        self.service = MapService(pack, store, provider=provider)
        self.cities = cities or set()  # cities the store alone answers for

    def covers(self, city: str | None) -> bool:
        if city is None:
            return True
        if self.pack is not None and self.pack.city_ok(city):  # the pack's own gate on geocode(city=...)
            return True
        return normalise_name(city) in self.cities

    @property
    def city(self) -> str | None:
        return self.pack.info.city if self.pack is not None else None


def _answers(data: Any) -> list[dict[str, Any]]:
    """Geocode results as {name, lat, lon, match}: rig records, or a recorded Google-style answer."""
    if isinstance(data, list):
        return [
            {"name": r.get("name", ""), "lat": r["lat"], "lon": r["lon"], "match": r.get("match", "fuzzy")}
            for r in data
            if isinstance(r, dict) and "lat" in r and "lon" in r
        ]
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        out = []
        for r in data["results"]:
            loc = (r.get("geometry") or {}).get("location") or {}
            if "lat" in loc and "lng" in loc:
                out.append(
                    {
                        "name": r.get("name") or r.get("formatted_address") or "",
                        "lat": loc["lat"],
                        "lon": loc["lng"],
                        "match": "provider",
                    }
                )
        return out
    return []


def _route_metres(data: Any) -> float:
    """A route answer's length: a rig Route, or a recorded Google-style directions answer."""
    if isinstance(data, dict) and isinstance(data.get("distance_m"), (int, float)):
        return float(data["distance_m"])
    if isinstance(data, dict) and data.get("routes"):
        return float(sum(leg["distance"]["value"] for leg in data["routes"][0]["legs"]))
    raise ValueError("the route answer has no distance")


class RouteValidator:
    def __init__(self, sites: list[Site], aliases: dict[str, str] | None = None) -> None:
        self.sites = sites
        self.aliases = dict(aliases or {})  # other names of a place -> its name on the map
        self._geo_cache: dict[tuple[int, str, str | None], Geocoded | None] = {}
        self._leg_cache: dict[tuple[int, tuple[float, ...]], float] = {}

    def site_for(self, city: str | None) -> Site | None:
        return next((s for s in self.sites if s.covers(city)), None)

    def _city_words(self, site: Site, city: str | None) -> set[str]:
        return set(words(city or "")) | set(words(site.city or ""))

    def _alias(self, text: str, cw: set[str]) -> str | None:
        key = " ".join(_drop_city_words(words(text), cw))
        for k, v in self.aliases.items():
            if " ".join(_drop_city_words(words(k), cw)) == key and key:
                return v
        return None

    def geocode(self, site_i: int, address: str, city: str | None) -> Geocoded | None:
        key = (site_i, normalise_name(address), city)
        if key not in self._geo_cache:
            self._geo_cache[key] = self._geocode(self.sites[site_i], address, city)
        return self._geo_cache[key]

    def _geocode(self, site: Site, address: str, city: str | None) -> Geocoded | None:
        cw = self._city_words(site, city)
        answers: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
        for exact_only in (True, False):  # an exact name in any part of the address beats a fuzzy match
            for cand in address_candidates(address):
                query = self._alias(cand, cw) or cand
                if not _drop_city_words(words(query), cw):  # only the city's name: not a place to run through
                    continue
                if query not in answers:
                    args: dict[str, Any] = {"query": query, "limit": GEOCODE_LIMIT}
                    if city:
                        args["city"] = city
                    res = site.service.call("geocode", args)
                    answers[query] = (_answers(res.data) if res.ok else [], res.source)
                found, source = answers[query]
                for a in found:
                    exact = normalise_name(a["name"]) == normalise_name(query)
                    ok = (exact or a["match"] == "provider") if exact_only else name_matches(query, a["name"], cw)
                    if ok:
                        return Geocoded(
                            address=address,
                            query=query,
                            name=a["name"],
                            lat=float(a["lat"]),
                            lon=float(a["lon"]),
                            match="exact" if exact else a["match"],
                            source=source,
                        )
        return None

    def leg(self, site_i: int, a: tuple[float, float], b: tuple[float, float]) -> float:
        """Metres on foot from a to b on one site, as a route's legs are measured (cached)."""
        if a == b:
            return 0.0
        key = (site_i, (round(a[0], 7), round(a[1], 7), round(b[0], 7), round(b[1], 7)))
        if key not in self._leg_cache:
            res = self.sites[site_i].service.call(
                "route",
                {"origin": {"lat": a[0], "lon": a[1]}, "destination": {"lat": b[0], "lon": b[1]}, "mode": "walk"},
            )
            if not res.ok:
                raise LookupError(f"no walking route from {a} to {b}: {res.error_category}: {res.error}")
            self._leg_cache[key] = _route_metres(res.data)
        return self._leg_cache[key]

    def measure(self, route_type: str, addresses: list[str], city: str | None, closed: bool = False) -> Measurement:
        """Geocode, route and measure one call. Never raises on model input. `closed` closes loops and doubles
        out-and-back routes the model left open; the default measures the waypoints in sequence, as the paper does."""
        order = [i for i, s in enumerate(self.sites) if s.covers(city)]
        if not order:
            return Measurement(ok=False, error_category="other", error=f"no map site covers {city!r}")
        if city is None and addresses:  # a generic prompt: the first site where the start geocodes
            order = [next((i for i in order if self.geocode(i, addresses[0], None)), order[0])]
        site_i = order[0]
        site = self.sites[site_i]
        out = Measurement(ok=False, site=site.name)
        for addr in addresses:
            g = self.geocode(site_i, addr, city)
            if g is None:
                out.error_category, out.error = "invalid_waypoint", f"waypoint could not be geocoded: {addr!r}"
                return out
            out.waypoints.append(g)
        pts = [(g.lat, g.lon) for g in out.waypoints]
        ends_at_start = len(pts) > 2 and haversine_m(*pts[0], *pts[-1]) <= SAME_POINT_M
        closes_itself = len(pts) > 1 and haversine_m(*pts[0], *pts[-1]) <= SAME_POINT_M
        if closed and route_type == "loop" and not closes_itself:
            pts = [*pts, pts[0]]
            out.closed_by_validator = True
        out.routed = pts
        try:
            out.legs_m = [self.leg(site_i, a, b) for a, b in pairwise(pts)]
        except (LookupError, ValueError, KeyError, TypeError) as exc:
            out.error_category, out.error = "other", str(exc)
            return out
        total = sum(out.legs_m)
        if closed and route_type == "out-and-back" and not ends_at_start:
            total *= 2
            out.doubled = True
        out.distance_m, out.ok = total, True
        return out
