"""Map tools for agents: a ToolSpec registry and the MapService that answers calls by provider chain
(replay store first, then the offline map pack). Calls never raise: every outcome is a ToolResult."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rig.maps.replay import CoordField, KeySpec, ReplayPolicy, ReplayStore
from rig.maps.validate import ArgumentError, check_coordinates, check_schema, validate

ErrorCategory = Literal["invalid_arguments", "unknown_tool", "not_found", "no_route", "replay_miss",
                        "internal_error"]
Source = Literal["hit", "fuzzy", "miss", "pack"]


class ToolResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ok: bool
    tool: str
    data: Any = None
    error: str | None = None
    error_category: ErrorCategory | None = None
    source: Source | None = None  # hit / fuzzy (replay store), pack (answered offline), miss (nobody could)
    similarity: float | None = None  # of a fuzzy-name replay answer
    distance_m: float | None = None  # of a nearest-coordinate replay answer
    arguments: dict[str, Any] | None = None  # the validated arguments, defaults filled


class ToolSpec(BaseModel):
    """A tool as the model sees it (name, description, JSON schema) and how the rig answers it."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[Any, dict[str, Any]], Any] | None = None  # (MapPack, args) -> JSON-able data
    key_spec: KeySpec = Field(default_factory=KeySpec)  # how the replay store keys this tool's arguments
    replay_policy: ReplayPolicy = Field(default_factory=ReplayPolicy)

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class ToolRegistry:
    def __init__(self, specs: list[ToolSpec] | None = None) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for s in specs or []:
            self.add(s)

    def add(self, spec: ToolSpec) -> None:
        check_schema(spec.parameters)
        if spec.name in self._specs:
            raise ValueError(f"tool {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return list(self._specs)

    def specs(self) -> list[ToolSpec]:
        return list(self._specs.values())


# -- the rig's own map tools ---------------------------------------------------------------------------

_LAT = {"type": "number", "minimum": -90, "maximum": 90, "description": "latitude in degrees (WGS84)"}
_LON = {"type": "number", "minimum": -180, "maximum": 180, "description": "longitude in degrees (WGS84)"}
_POINT = {"type": "object", "properties": {"lat": _LAT, "lon": _LON}, "required": ["lat", "lon"],
          "additionalProperties": False}
_MODE = {"type": "string", "enum": ["walk", "bike", "drive"], "default": "walk"}
_NAME = {"type": "string", "minLength": 1, "maxLength": 200}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def _dump(x: Any) -> Any:
    if isinstance(x, BaseModel):
        return x.model_dump(mode="json")
    if isinstance(x, list):
        return [_dump(v) for v in x]
    return x


def _pt(p: Mapping[str, float]) -> tuple[float, float]:
    return float(p["lat"]), float(p["lon"])


def _route(pack: Any, a: dict[str, Any]) -> Any:
    pts = [_pt(a["origin"]), *(_pt(w) for w in a.get("waypoints", [])), _pt(a["destination"])]
    return _dump(pack.route(pts, a["mode"], a.get("avoid", [])))


_POINT_PAIR = [CoordField(name="lat", lon_arg="lon")]

DEFAULT_TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="geocode",
        description="Find places (POIs, streets, areas, addresses) by name. Returns matches with lat/lon and a score.",
        parameters=_obj({"query": _NAME, "city": {"type": "string", "minLength": 1, "maxLength": 100},
                         "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}}, ["query"]),
        handler=lambda pack, a: _dump(pack.geocode(a["query"], a.get("city"), a["limit"])),
        key_spec=KeySpec(names=["query", "city"], fuzzy_field="query"),
        replay_policy=ReplayPolicy(fuzzy_names=True, fuzzy_threshold=90),
    ),
    ToolSpec(
        name="reverse_geocode",
        description="Address, nearest place, street and land use at a coordinate.",
        parameters=_obj({"lat": _LAT, "lon": _LON}, ["lat", "lon"]),
        handler=lambda pack, a: _dump(pack.reverse_geocode(a["lat"], a["lon"])),
        key_spec=KeySpec(coords=_POINT_PAIR),
        replay_policy=ReplayPolicy(nearest=True, max_distance_m=25),
    ),
    ToolSpec(
        name="route",
        description="Route from origin to destination through optional waypoints, by walk, bike or drive. "
                    "Returns distance (m), duration (s), legs and turn-by-turn steps.",
        parameters=_obj({
            "origin": _POINT, "destination": _POINT,
            "waypoints": {"type": "array", "items": _POINT, "maxItems": 8, "default": []},
            "mode": _MODE,
            "avoid": {"type": "array", "uniqueItems": True, "maxItems": 7, "default": [],
                      "items": {"type": "string",
                                "enum": ["tolls", "highways", "ferries", "steps", "unpaved", "indoor", "tunnels"]}},
        }, ["origin", "destination"]),
        handler=_route,
        key_spec=KeySpec(coords=[CoordField(name="origin"), CoordField(name="destination"),
                                 CoordField(name="waypoints", many=True)]),
        replay_policy=ReplayPolicy(nearest=True, max_distance_m=50),
    ),
    ToolSpec(
        name="nearby",
        description="Places within radius_m of a coordinate, nearest first; filter by OSM category "
                    "(e.g. restaurant, cafe, amenity=pharmacy) and/or a keyword in the name.",
        parameters=_obj({"lat": _LAT, "lon": _LON,
                         "radius_m": {"type": "number", "exclusiveMinimum": 0, "maximum": 50_000, "default": 1000},
                         "category": {"type": "string", "minLength": 1, "maxLength": 64},
                         "keyword": {"type": "string", "minLength": 1, "maxLength": 100},
                         "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20}}, ["lat", "lon"]),
        handler=lambda pack, a: _dump(pack.nearby(a["lat"], a["lon"], a["radius_m"], a.get("category"),
                                                  a.get("keyword"), a["limit"])),
        key_spec=KeySpec(coords=_POINT_PAIR, names=["category", "keyword"]),
        replay_policy=ReplayPolicy(nearest=True, max_distance_m=25),
    ),
    ToolSpec(
        name="search_stations",
        description="EV charging stations within radius_m of a coordinate, nearest first.",
        parameters=_obj({"lat": _LAT, "lon": _LON,
                         "radius_m": {"type": "number", "exclusiveMinimum": 0, "maximum": 50_000, "default": 5000},
                         "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20}}, ["lat", "lon"]),
        handler=lambda pack, a: _dump(pack.stations(a["lat"], a["lon"], a["radius_m"], a["limit"])),
        key_spec=KeySpec(coords=_POINT_PAIR),
        replay_policy=ReplayPolicy(nearest=True, max_distance_m=25),
    ),
    ToolSpec(
        name="distance",
        description="Distance between two coordinates: great_circle (straight line), geodesic (WGS84 "
                    "ellipsoid) or network (along the walk/bike/drive graph, with duration).",
        parameters=_obj({"a": _POINT, "b": _POINT,
                         "kind": {"type": "string", "enum": ["great_circle", "geodesic", "network"],
                                  "default": "great_circle"},
                         "mode": _MODE}, ["a", "b"]),
        handler=lambda pack, a: _dump(pack.distance(_pt(a["a"]), _pt(a["b"]), a["kind"], a["mode"])),
        key_spec=KeySpec(coords=[CoordField(name="a"), CoordField(name="b")]),
        replay_policy=ReplayPolicy(),
    ),
]


def default_registry() -> ToolRegistry:
    return ToolRegistry([s.model_copy() for s in DEFAULT_TOOLS])


class MapService:
    """Answers tool calls: validate, then replay store (hit / fuzzy), then map pack (pack), else miss.

    `policies` overrides a tool's replay fallbacks (e.g. strict mode: ReplayPolicy() for every tool)."""

    def __init__(self, pack: Any | None = None, store: ReplayStore | None = None, provider: str = "rig",
                 registry: ToolRegistry | None = None, policies: Mapping[str, ReplayPolicy] | None = None) -> None:
        self.pack = pack
        self.store = store
        self.provider = provider
        self.registry = registry or default_registry()
        self.policies = dict(policies or {})
        self.counts: Counter[str] = Counter()  # answers by source, plus "error:<category>"
        if store is not None:
            for spec in self.registry.specs():
                store.register(provider, spec.name, spec.key_spec)

    def schemas(self) -> list[dict[str, Any]]:
        return [s.openai_schema() for s in self.registry.specs()]

    def call(self, name: str, arguments: Any) -> ToolResult:
        try:
            result = self._call(name, arguments)
        except Exception as exc:  # noqa: BLE001 - a tool call must never take the agent loop down
            result = ToolResult(ok=False, tool=str(name), error=f"{type(exc).__name__}: {exc}",
                                error_category="internal_error")
        self.counts[result.source or f"error:{result.error_category}"] += 1
        return result

    def _call(self, name: str, arguments: Any) -> ToolResult:
        spec = self.registry.get(name) if isinstance(name, str) else None
        if spec is None:
            return ToolResult(ok=False, tool=str(name), error=f"unknown tool {name!r}; available: "
                              f"{', '.join(self.registry.names())}", error_category="unknown_tool")
        if isinstance(arguments, str):  # some engines hand over the raw JSON text
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return self._invalid(name, f"arguments are not valid JSON: {exc.msg}")
        if arguments is None:
            arguments = {}
        try:
            # Coordinates first: "lat 95" is better reported as a swap than as a range error.
            check_coordinates(arguments, getattr(getattr(self.pack, "info", None), "extent", None))
            args = validate(arguments, spec.parameters)
        except ArgumentError as exc:
            return self._invalid(name, str(exc))

        miss = False
        if self.store is not None:
            policy = self.policies.get(name, spec.replay_policy)
            ans = self.store.get(self.provider, name, args, policy)
            if ans.label != "miss":
                return ToolResult(ok=True, tool=name, data=ans.response, source=ans.label,
                                  similarity=ans.similarity, distance_m=ans.distance_m, arguments=args)
            miss = True
        if self.pack is None or spec.handler is None:
            why = "no recorded answer for these arguments" if miss else "no replay store or map pack configured"
            return ToolResult(ok=False, tool=name, error=why, error_category="replay_miss", source="miss",
                              arguments=args)
        return self._from_pack(spec, args)

    def _from_pack(self, spec: ToolSpec, args: dict[str, Any]) -> ToolResult:
        from rig.maps.routing import RoutingError

        try:
            data = spec.handler(self.pack, args)
        except RoutingError as exc:
            return ToolResult(ok=False, tool=spec.name, error=str(exc), error_category="no_route", source="pack",
                              arguments=args)
        except ValueError as exc:
            return self._invalid(spec.name, str(exc))
        return ToolResult(ok=True, tool=spec.name, data=data, source="pack", arguments=args)

    @staticmethod
    def _invalid(name: str, message: str) -> ToolResult:
        return ToolResult(ok=False, tool=name, error=message, error_category="invalid_arguments")
