"""The environment GeoRover's tools look at: stations, the POIs around a point, and distances.

Two worlds answer the same questions:
- ``PackWorld``: an offline map pack (OSM charging stations, the pack's POIs, driving distances on the drive graph).
- ``UpstreamWorld``: the upstream station table with its per-station POI lists and geodesic distances (the upstream
  data carries no road network; its own ``Distance`` field is geodesic, notes C1.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rig.benchmarks.evgeoqa.data import Setting, Station, is_noise, poi_categories
from rig.maps.geo import geodesic_m, haversine_many_m
from rig.maps.records import Extent

UPSTREAM_SNAP_M = 50.0  # Search_Nearby_POI on upstream data: the POI list of the station within this distance


class NoRoute(Exception):
    """No driving route between two points (off the network, or not connected)."""


@dataclass
class PoiHit:
    key: str  # a stable id (pack place_id) or, for upstream data, the POI name
    name: str
    type: str
    address: str
    distance_m: float
    categories: frozenset[str] = field(default_factory=frozenset)


class World:
    city: str
    setting: Setting
    extent: Extent
    stations: list[Station]
    source: str | None = None  # ToolCall.source of answers ("pack" when a map pack answered)

    def station(self, station_id: str) -> Station | None:
        return self._by_id.get(station_id)

    def stations_near(self, lat: float, lon: float) -> list[tuple[Station, float]]:
        raise NotImplementedError

    def pois_near(self, lat: float, lon: float) -> list[PoiHit]:
        raise NotImplementedError

    def distance(self, a: tuple[float, float], b: tuple[float, float]) -> float:
        raise NotImplementedError

    def _index(self) -> None:
        self._by_id: dict[str, Station] = {}
        for s in self.stations:
            self._by_id.setdefault(s.station_id, s)


def station_id_of(place_id: str) -> str:
    """``poi/n1685821074`` -> ``n1685821074``: the OSM part is what the model sees and answers with."""
    return place_id.split("/", 1)[1] if place_id.startswith("poi/") else place_id


class PackWorld(World):
    source = "pack"

    def __init__(self, pack, setting: Setting) -> None:
        self.pack = pack
        self.setting = setting
        self.city = pack.info.city or "pack"
        self.extent = pack.info.extent
        stations = []
        for i in np.nonzero(pack.kind == "poi")[0]:
            p = pack.place(int(i))
            if p.category_key == "amenity" and p.category == "charging_station":
                stations.append(
                    Station(
                        station_id=station_id_of(p.place_id), name=p.name, lat=p.lat, lon=p.lon, address=p.address or ""
                    )
                )
        self.stations = sorted(stations, key=lambda s: s.station_id)
        self._index()

    def stations_near(self, lat: float, lon: float) -> list[tuple[Station, float]]:
        hits = self.pack.stations(lat, lon, self.setting.search_radius_m, limit=max(1, len(self.stations)))
        return [(self._by_id[station_id_of(h.place_id)], h.distance_m) for h in hits]

    def pois_near(self, lat: float, lon: float) -> list[PoiHit]:
        """POIs within the walking radius, nearest first, without transit stops and map furniture, capped."""
        out = []
        for p in self.pack.nearby(lat, lon, self.setting.walk_radius_m, limit=1_000_000):
            if is_noise(p.category_key, p.category):
                continue
            out.append(
                PoiHit(
                    key=p.place_id,
                    name=p.name,
                    type=f"{p.category_key};{p.category}",
                    address=p.address or "",
                    distance_m=p.distance_m,
                    categories=frozenset(poi_categories(p.category_key, p.category)),
                )
            )
            if len(out) >= self.setting.poi_cap:
                break
        return out

    def distance(self, a: tuple[float, float], b: tuple[float, float]) -> float:
        from rig.maps.routing import RoutingError

        try:
            return float(self.pack.distance(a, b, kind="network", mode="drive").distance_m)
        except RoutingError as exc:
            raise NoRoute(str(exc)) from None


class UpstreamWorld(World):
    """Upstream stations (``Stations.json``) with their POI lists; distances are WGS84 geodesic."""

    def __init__(
        self, stations: list[Station], pois: list[list[PoiHit]], setting: Setting, city: str, extent: Extent
    ) -> None:
        self.stations = stations
        self.setting = setting
        self.city = city
        self.extent = extent
        if len(pois) != len(stations):
            raise ValueError("one POI list per station")
        self._pois = pois  # per station (ids repeat upstream), nearest first
        self._index()
        self._lat = np.array([s.lat for s in stations])
        self._lon = np.array([s.lon for s in stations])

    def stations_near(self, lat: float, lon: float) -> list[tuple[Station, float]]:
        if not self.stations:
            return []
        # Haversine prefilter with slack, then the geodesic distance that the upstream data uses.
        rough = haversine_many_m(lat, lon, self._lat, self._lon)
        out = []
        for i in np.nonzero(rough <= self.setting.search_radius_m * 1.01 + 10)[0]:
            s = self.stations[int(i)]
            d = geodesic_m(lat, lon, s.lat, s.lon)
            if d <= self.setting.search_radius_m:
                out.append((s, d))
        out.sort(key=lambda x: (x[1], x[0].station_id))
        return out

    def pois_near(self, lat: float, lon: float) -> list[PoiHit]:
        """The POI list of the station at this coordinate (within 50 m); elsewhere nothing is known."""
        if not self.stations:
            return []
        rough = haversine_many_m(lat, lon, self._lat, self._lon)
        for i in np.argsort(rough, kind="stable"):
            if rough[i] > UPSTREAM_SNAP_M:
                break
            pois = self._pois[int(i)]
            if pois:
                return pois[: self.setting.poi_cap]
        return []

    def distance(self, a: tuple[float, float], b: tuple[float, float]) -> float:
        return geodesic_m(a[0], a[1], b[0], b[1])
