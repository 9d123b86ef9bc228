"""Pydantic records returned by the map service. Coordinates are always named `lat` and `lon`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["walk", "bike", "drive"]
MODES: tuple[str, ...] = ("walk", "bike", "drive")
PlaceKind = Literal["poi", "street", "area", "address"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LatLon(_Record):
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)


class Extent(_Record):
    min_lat: float
    min_lon: float
    max_lat: float
    max_lon: float

    def contains(self, lat: float, lon: float, margin_deg: float = 0.0) -> bool:
        return (
            self.min_lat - margin_deg <= lat <= self.max_lat + margin_deg
            and self.min_lon - margin_deg <= lon <= self.max_lon + margin_deg
        )


class PackInfo(_Record):
    """Contents of pack.json: what a pack holds and where it came from (for the run manifest)."""

    format_version: int
    source_file: str  # file name only: packs move between machines
    source_sha256: str
    built_at: str  # ISO-8601 UTC
    build_seconds: float
    builder: dict[str, str]  # library versions that made the pack
    city: str | None
    extent: Extent
    counts: dict[str, int]


class Place(_Record):
    """A gazetteer entry: named POI, named street, named area, or address point."""

    place_id: str  # "<kind>/<osm type letter><osm id>", stable across rebuilds of the same extract
    kind: PlaceKind
    name: str
    category: str | None = None  # OSM tag value, e.g. "restaurant"
    category_key: str | None = None  # OSM tag key, e.g. "amenity"
    address: str | None = None
    address_source: Literal["tags", "nearest_street", "none"] = "none"
    street: str | None = None
    housenumber: str | None = None
    city: str | None = None
    lat: float
    lon: float
    opening_hours: str | None = None
    extra: dict[str, str] = Field(default_factory=dict)


class GeocodeResult(Place):
    score: float  # 100 for an exact normalised-name match, else the rapidfuzz WRatio score
    match: Literal["exact", "fuzzy"]


class NearbyResult(Place):
    distance_m: float


class Area(_Record):
    area_id: str
    name: str | None
    category: str
    category_key: str
    lat: float  # centroid of the outer rings
    lon: float
    area_m2: float


class ReverseGeocodeResult(_Record):
    lat: float
    lon: float
    address: str | None  # best address text, or None far from anything
    nearest: Place | None  # nearest address point or POI
    distance_m: float | None
    street: str | None  # nearest named street
    street_distance_m: float | None
    areas: list[Area] = Field(default_factory=list)  # land-use areas containing the point
    city: str | None = None


class RouteStep(_Record):
    instruction: str
    maneuver: str  # depart, straight, turn-left, turn-slight-right, uturn, arrive ...
    street: str | None
    distance_m: float
    duration_s: float
    start: LatLon
    end: LatLon
    bearing_deg: float  # heading at the start of the step
    geometry: list[tuple[float, float]]  # (lat, lon) pairs
    flags: list[str] = Field(default_factory=list)  # toll, highway, ferry, steps, unpaved ...


class RouteLeg(_Record):
    start: LatLon  # the waypoint as asked
    end: LatLon
    start_snap_m: float  # straight-line access from the waypoint to the graph, counted in distance_m
    end_snap_m: float
    distance_m: float
    duration_s: float
    steps: list[RouteStep]


class Route(_Record):
    mode: Mode
    avoid: list[str]
    distance_m: float  # sum of the legs
    duration_s: float
    legs: list[RouteLeg]

    def geometry(self) -> list[tuple[float, float]]:
        pts: list[tuple[float, float]] = []
        for leg in self.legs:
            for step in leg.steps:
                for p in step.geometry:
                    if not pts or pts[-1] != p:
                        pts.append(p)
        return pts


class DistanceResult(_Record):
    kind: Literal["great_circle", "geodesic", "network"]
    mode: Mode | None = None
    distance_m: float
    duration_s: float | None = None
