"""Map tools for agents: the rig's map tools as a Toolkit, and the MapService that answers calls by provider chain
(replay store first, then the offline map pack). Calls never raise: every outcome is a ToolResult whose ``meta`` says
where the answer came from (``source``) and holds the validated ``arguments``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from rig.agents.toolkit import Toolkit, tool
from rig.maps.replay import CoordField, KeySpec, ReplayPolicy, ReplayStore
from rig.maps.validate import ArgumentError, check_coordinates, check_schema, validate
from rig.records import ToolResult


class MapToolkit(Toolkit):
    """Tools the map service can answer. Per tool name: how the replay store keys its arguments (``key_specs``) and
    which fallbacks it may use (``policies``). A tool's method answers from ``self.pack``; the tools named in
    ``recorded_only`` have recorded answers only, and with no pack every tool is recorded-only."""

    key_specs: ClassVar[dict[str, KeySpec]] = {}
    policies: ClassVar[dict[str, ReplayPolicy]] = {}
    recorded_only: ClassVar[tuple[str, ...]] = ()

    def __init__(self, pack: Any = None) -> None:
        self.pack = pack

    def answers_from_pack(self, name: str) -> bool:
        return self.pack is not None and name not in self.recorded_only


# -- the rig's own map tools ---------------------------------------------------------------------------

_LAT = {"minimum": -90, "maximum": 90, "description": "latitude in degrees (WGS84)"}
_LON = {"minimum": -180, "maximum": 180, "description": "longitude in degrees (WGS84)"}
_POINT = {
    "type": "object",
    "properties": {"lat": {"type": "number", **_LAT}, "lon": {"type": "number", **_LON}},
    "required": ["lat", "lon"],
    "additionalProperties": False,
}
_POINT_SHAPE = {k: v for k, v in _POINT.items() if k != "type"}  # the annotation (dict) says "object"
_NAME = {"minLength": 1, "maxLength": 200}
_POINT_PAIR = [CoordField(name="lat", lon_arg="lon")]
Mode = Literal["walk", "bike", "drive"]
Avoid = Literal["tolls", "highways", "ferries", "steps", "unpaved", "indoor", "tunnels"]


def _dump(x: Any) -> Any:
    if isinstance(x, BaseModel):
        return x.model_dump(mode="json")
    if isinstance(x, list):
        return [_dump(v) for v in x]
    return x


def _pt(p: Mapping[str, float]) -> tuple[float, float]:
    return float(p["lat"]), float(p["lon"])


class MapTools(MapToolkit):
    """The rig's map tools over a map pack."""

    key_specs: ClassVar[dict[str, KeySpec]] = {
        "geocode": KeySpec(names=["query", "city"], fuzzy_field="query"),
        "reverse_geocode": KeySpec(coords=_POINT_PAIR),
        "route": KeySpec(
            coords=[CoordField(name="origin"), CoordField(name="destination"), CoordField(name="waypoints", many=True)]
        ),
        "nearby": KeySpec(coords=_POINT_PAIR, names=["category", "keyword"]),
        "search_stations": KeySpec(coords=_POINT_PAIR),
        "distance": KeySpec(coords=[CoordField(name="a"), CoordField(name="b")]),
    }
    policies: ClassVar[dict[str, ReplayPolicy]] = {
        "geocode": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=90),
        "reverse_geocode": ReplayPolicy(nearest=True, max_distance_m=25),
        "route": ReplayPolicy(nearest=True, max_distance_m=50),
        "nearby": ReplayPolicy(nearest=True, max_distance_m=25),
        "search_stations": ReplayPolicy(nearest=True, max_distance_m=25),
        "distance": ReplayPolicy(),
    }

    @tool(query=_NAME, city={"minLength": 1, "maxLength": 100}, limit={"minimum": 1, "maximum": 20})
    def geocode(self, query: str, city: str | None = None, limit: int = 5) -> Any:
        """Find places (POIs, streets, areas, addresses) by name. Returns matches with lat/lon and a score."""
        return _dump(self.pack.geocode(query, city, limit))

    @tool(lat=_LAT, lon=_LON)
    def reverse_geocode(self, lat: float, lon: float) -> Any:
        """Address, nearest place, street and land use at a coordinate."""
        return _dump(self.pack.reverse_geocode(lat, lon))

    @tool(
        origin=_POINT_SHAPE,
        destination=_POINT_SHAPE,
        waypoints={"items": _POINT, "maxItems": 8},
        avoid={"uniqueItems": True, "maxItems": 7, "default": ..., "items": ...},
    )
    def route(
        self,
        origin: dict[str, float],
        destination: dict[str, float],
        waypoints: Sequence[dict[str, float]] = (),
        mode: Mode = "walk",
        avoid: Sequence[Avoid] = (),
    ) -> Any:
        """Route from origin to destination through optional waypoints, by walk, bike or drive. Returns distance
        (m), duration (s), legs and turn-by-turn steps."""
        return _dump(self.pack.route([_pt(origin), *(_pt(w) for w in waypoints), _pt(destination)], mode, avoid))

    @tool(
        lat=_LAT,
        lon=_LON,
        radius_m={"exclusiveMinimum": 0, "maximum": 50_000},
        category={"minLength": 1, "maxLength": 64},
        keyword={"minLength": 1, "maxLength": 100},
        limit={"minimum": 1, "maximum": 50},
    )
    def nearby(
        self,
        lat: float,
        lon: float,
        radius_m: float = 1000,
        category: str | None = None,
        keyword: str | None = None,
        limit: int = 20,
    ) -> Any:
        """Places within radius_m of a coordinate, nearest first; filter by OSM category (e.g. restaurant, cafe,
        amenity=pharmacy) and/or a keyword in the name."""
        return _dump(self.pack.nearby(lat, lon, radius_m, category, keyword, limit))

    @tool(lat=_LAT, lon=_LON, radius_m={"exclusiveMinimum": 0, "maximum": 50_000}, limit={"minimum": 1, "maximum": 50})
    def search_stations(self, lat: float, lon: float, radius_m: float = 5000, limit: int = 20) -> Any:
        """EV charging stations within radius_m of a coordinate, nearest first."""
        return _dump(self.pack.stations(lat, lon, radius_m, limit))

    @tool(a=_POINT_SHAPE, b=_POINT_SHAPE)
    def distance(
        self,
        a: dict[str, float],
        b: dict[str, float],
        kind: Literal["great_circle", "geodesic", "network"] = "great_circle",
        mode: Mode = "walk",
    ) -> Any:
        """Distance between two coordinates: great_circle (straight line), geodesic (WGS84 ellipsoid) or network
        (along the walk/bike/drive graph, with duration)."""
        return _dump(self.pack.distance(_pt(a), _pt(b), kind, mode))


class MapService:
    """Answers tool calls: validate, then replay store (hit / fuzzy), then map pack (pack), else miss.

    ``tools`` defaults to the rig's map tools over ``pack``; ``pack`` itself only bounds coordinates here.
    ``policies`` overrides a tool's replay fallbacks (e.g. strict mode: ReplayPolicy() for every tool)."""

    def __init__(
        self,
        pack: Any | None = None,
        store: ReplayStore | None = None,
        provider: str = "rig",
        tools: MapToolkit | None = None,
        policies: Mapping[str, ReplayPolicy] | None = None,
    ) -> None:
        self.pack = pack
        self.store = store
        self.provider = provider
        self.tools = tools if tools is not None else MapTools(pack)
        self.specs = {s.name: s for s in self.tools.specs()}
        for spec in self.specs.values():
            check_schema(spec.parameters)  # a keyword the validator does not know is a programming error
        self.policies = {**self.tools.policies, **(policies or {})}
        self.counts: Counter[str] = Counter()  # answers by source, plus "error:<category>"
        if store is not None:
            for name in self.specs:
                store.register(provider, name, self.tools.key_specs.get(name, KeySpec()))

    def schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": s.model_dump()} for s in self.specs.values()]

    def call(self, name: str, arguments: Any) -> ToolResult:
        try:
            result = self._call(name, arguments)
        except Exception as exc:
            result = ToolResult(ok=False, error=f"{type(exc).__name__}: {exc}", error_category="internal_error")
        self.counts[result.source or f"error:{result.error_category}"] += 1
        return result

    def _call(self, name: str, arguments: Any) -> ToolResult:
        spec = self.specs.get(name) if isinstance(name, str) else None
        if spec is None:
            return ToolResult(
                ok=False,
                error=f"unknown tool {name!r}; available: {', '.join(self.specs)}",
                error_category="unknown_tool",
            )
        if isinstance(arguments, str):  # some engines hand over the raw JSON text
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return self._invalid(f"arguments are not valid JSON: {exc.msg}")
        if arguments is None:
            arguments = {}
        try:
            # Coordinates first: "lat 95" is better reported as a swap than as a range error.
            check_coordinates(arguments, getattr(getattr(self.pack, "info", None), "extent", None))
            args = validate(arguments, spec.parameters)
        except ArgumentError as exc:
            return self._invalid(str(exc))

        miss = False
        if self.store is not None:
            ans = self.store.get(self.provider, name, args, self.policies.get(name, ReplayPolicy()))
            if ans.label != "miss":
                return ToolResult(
                    ok=True,
                    data=ans.response,
                    meta={
                        "source": ans.label,
                        "similarity": ans.similarity,
                        "distance_m": ans.distance_m,
                        "arguments": args,
                    },
                )
            miss = True
        if not self.tools.answers_from_pack(name):
            why = "no recorded answer for these arguments" if miss else "no replay store or map pack configured"
            return ToolResult(
                ok=False, error=why, error_category="replay_miss", meta={"source": "miss", "arguments": args}
            )
        return self._from_pack(name, args)

    def _from_pack(self, name: str, args: dict[str, Any]) -> ToolResult:
        from rig.maps.routing import RoutingError

        try:
            data = self.tools.method(name)(**args)  # type: ignore[misc]
        except RoutingError as exc:
            return ToolResult(
                ok=False, error=str(exc), error_category="no_route", meta={"source": "pack", "arguments": args}
            )
        except ValueError as exc:
            return self._invalid(str(exc))
        return ToolResult(ok=True, data=data, meta={"source": "pack", "arguments": args})

    @staticmethod
    def _invalid(message: str) -> ToolResult:
        return ToolResult(ok=False, error=message, error_category="invalid_arguments")
