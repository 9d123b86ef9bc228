"""MobilityBench's nine sandbox tools: argument schemas and defaults of the reference configuration, answered in
AMap's dialect inside the MobilityBench envelope ``{status: 0|1, data, error}``.

Calls go through rig.maps.tools.MapService: validation, then the replay store (exact, then the labelled fallbacks:
fuzzy names for name-keyed tools, nearest coordinates within 100 m for coordinate-keyed ones), then, only in
``sandbox=pack`` mode, the offline map pack. Weather, traffic and transit have no pack handler: they are served from
recorded responses only. Coordinates are AMap's ``"lon,lat"`` strings; reverse geocoding takes longitude and latitude
as separate strings, as the reference does.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from rig.agents.toolkit import tool
from rig.maps import dialects as D
from rig.maps.geo import compass
from rig.maps.replay import CoordField, KeySpec, ReplayPolicy, ReplayStore
from rig.maps.tools import MapService, MapToolkit
from rig.records import ToolResult, ToolSpec

PROVIDER = "mobilitybench"
TOOL_NAMES: tuple[str, ...] = (
    "query_poi",
    "driving_route",
    "walking_route",
    "bicycling_route",
    "bus_route",
    "weather_query",
    "search_around_poi",
    "reverse_geocoding",
    "traffic_status",
)
ROUTE_TOOLS = ("driving_route", "walking_route", "bicycling_route", "bus_route")
# The ground truth of the upstream data names the traffic tool differently from the sandbox.
GT_ALIASES = {"traffic_status_road_api": "traffic_status"}

# Driving preferences: the reference's six options, in English for the authored pack (same order).
STRATEGIES_ZH = ("躲避拥堵", "高速优先", "不走高速", "少收费", "大路优先", "速度最快")
STRATEGIES_EN = ("avoid_congestion", "highways_first", "avoid_highways", "avoid_tolls", "main_roads_first", "fastest")
STRATEGY_ZH_TO_EN = dict(zip(STRATEGIES_ZH, STRATEGIES_EN, strict=True))
# What the offline router can honour; the others return the default route (no live traffic, no road classes).
STRATEGY_AVOID = {
    "avoid_highways": ["highways"],
    "avoid_tolls": ["tolls"],
    "不走高速": ["highways"],
    "少收费": ["tolls"],
}
NEAREST_M = 100.0  # nearest-coordinate fallback bound (the reference's 0.001 degree box is ~55-111 m here)
FUZZY_NAME = 85.0

_COORD = 'a coordinate as the string "lon,lat" (longitude first), e.g. "24.941000,60.170000"'


def _s(desc: str, **kw: Any) -> dict[str, Any]:
    """A string argument's schema keys beyond its type: the reference puts the description first."""
    return {"description": desc, **kw}


def schemas(lang: str = "en") -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (description, JSON schema), in the reference's registration order."""
    return {t.name: (t.description, t.parameters) for t in MobilityTools(lang).specs()}


def _route_key(many: bool = True) -> KeySpec:
    coords = [CoordField(name="origin", order="lon,lat"), CoordField(name="destination", order="lon,lat")]
    if many:
        coords.append(CoordField(name="waypoints", order="lon,lat", many=True))
    return KeySpec(coords=coords)


KEY_SPECS: dict[str, KeySpec] = {
    # The reference ignores the city when the keyword is known (first city entry); so does this key.
    "query_poi": KeySpec(names=["keywords"], ignore=["city"], fuzzy_field="keywords"),
    "driving_route": _route_key(),
    "walking_route": _route_key(False),
    "bicycling_route": _route_key(False),
    "bus_route": KeySpec(
        coords=[CoordField(name="origin", order="lon,lat"), CoordField(name="destination", order="lon,lat")],
        ignore=["strategy"],
    ),
    "weather_query": KeySpec(names=["city"], fuzzy_field="city"),
    "search_around_poi": KeySpec(
        coords=[CoordField(name="location", order="lon,lat")], names=["keywords"], ignore=["radius"]
    ),
    "reverse_geocoding": KeySpec(coords=[CoordField(name="latitude", lon_arg="longitude")], ignore=["radius"]),
    "traffic_status": KeySpec(names=["name", "city"], fuzzy_field="name"),
}
POLICIES: dict[str, ReplayPolicy] = {
    "query_poi": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=FUZZY_NAME),
    "weather_query": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=FUZZY_NAME),
    "traffic_status": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=FUZZY_NAME),
    **{
        n: ReplayPolicy(nearest=True, max_distance_m=NEAREST_M)
        for n in (
            "driving_route",
            "walking_route",
            "bicycling_route",
            "bus_route",
            "search_around_poi",
            "reverse_geocoding",
        )
    },
}


# -- coordinate strings ----------------------------------------------------------------------------------


def parse_lonlat(value: Any) -> tuple[float, float] | None:
    """``"lon,lat"`` -> (lat, lon), or None when it is not two finite numbers in range."""
    if not isinstance(value, str) or value.count(",") != 1:
        return None
    try:
        lon, lat = (float(x) for x in value.split(","))
    except ValueError:
        return None
    if not (math.isfinite(lat) and math.isfinite(lon) and -90 <= lat <= 90 and -180 <= lon <= 180):
        return None
    return lat, lon


def lonlat(lat: float, lon: float) -> str:
    return f"{lon:.6f},{lat:.6f}"


def coordinate_errors(name: str, args: dict[str, Any], extent: Any = None) -> list[str]:
    """Format checks that JSON schema cannot express here: "lon,lat" strings in range, and no swapped order."""
    errs: list[str] = []

    def one(path: str, value: Any) -> None:
        if not isinstance(value, str):
            return  # the schema reports the type
        p = parse_lonlat(value)
        if p is None:
            errs.append(
                f'{path}: {value!r} is not "lon,lat" (two numbers, longitude in [-180, 180], latitude in [-90, 90])'
            )
            return
        lat, lon = p
        if extent is not None and not extent.contains(lat, lon, 0.5) and extent.contains(lon, lat, 0.5):
            errs.append(f'{path}: {value!r} looks like "lat,lon"; this tool takes "lon,lat" (longitude first)')

    for key in ("origin", "destination", "location"):
        if key in args:
            one(key, args[key])
    if name == "driving_route" and isinstance(args.get("waypoints"), list):
        for i, w in enumerate(args["waypoints"]):
            one(f"waypoints[{i}]", w)
    if name == "reverse_geocoding":
        try:
            lon, lat = float(args.get("longitude")), float(args.get("latitude"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            if isinstance(args.get("longitude"), str) and isinstance(args.get("latitude"), str):
                errs.append("longitude and latitude must be decimal numbers written as strings")
            return errs
        if not (math.isfinite(lat) and math.isfinite(lon) and -90 <= lat <= 90 and -180 <= lon <= 180):
            errs.append(f"latitude {lat} / longitude {lon} out of range")
        elif extent is not None and not extent.contains(lat, lon, 0.5) and extent.contains(lon, lat, 0.5):
            errs.append("longitude and latitude look swapped")
    return errs


def schema_valid(name: str, arguments: Any, lang: str = "en", extent: Any = None) -> bool:
    """f_SC of the paper: the call names a sandbox tool, gives every mandatory argument, and every value has a
    valid type, format and range (the same checks the sandbox applies before answering)."""
    from rig.maps.validate import ArgumentError, validate

    name = GT_ALIASES.get(name, name)
    spec = schemas(lang).get(name)
    if spec is None:
        return False
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):  # rescored upstream arguments: bad JSON, huge integers, deep nesting
            return False
    if not isinstance(arguments, dict):
        return False
    try:
        validate(arguments, spec[1])
    except ArgumentError:
        return False
    return not coordinate_errors(name, arguments, extent)


# -- pack handlers (sandbox=pack, and building the replay store) ---------------------------------------------


def _compact_route(resp: dict[str, Any], route: Any = None) -> dict[str, Any]:
    """AMap direction payload without per-step polylines (no decision-relevant information, and they would fill
    the agent's context); with ``route``, the step texts in English (the dialect writes AMap's Chinese)."""
    steps = [s for leg in route.legs for s in leg.steps] if route is not None else []
    for path in resp.get("route", {}).get("paths", []):
        for i, step in enumerate(path.get("steps", [])):
            step.pop("polyline", None)
            if i < len(steps):
                nxt = steps[i + 1].maneuver if i + 1 < len(steps) else "arrive"
                step.update(
                    instruction=steps[i].instruction,
                    orientation=compass(steps[i].bearing_deg),
                    road_name=steps[i].street or "",
                    action=nxt,
                    assistant_action="",
                )
    return resp


BusStrategy = Literal["0", "1", "2", "3", "4", "5", "7", "8"]
RECORDED_ONLY = ("bus_route", "weather_query", "traffic_status")
_OD = {"origin": _s("start, " + _COORD), "destination": _s("end, " + _COORD)}


class MobilityTools(MapToolkit):
    """The nine sandbox tools in the reference's registration order; with a pack, the six it can answer are
    answered from it (``sandbox=pack``, and building the replay store)."""

    key_specs: ClassVar[dict[str, KeySpec]] = KEY_SPECS
    policies: ClassVar[dict[str, ReplayPolicy]] = POLICIES
    recorded_only: ClassVar[tuple[str, ...]] = RECORDED_ONLY

    def __init__(self, lang: str = "en", pack: Any = None) -> None:
        super().__init__(pack)
        self.lang = lang
        self.strategies = list(STRATEGIES_ZH if lang == "zh" else STRATEGIES_EN)

    @tool(keywords=_s("place name or keywords", minLength=2, maxLength=200), city=_s("city to search in", maxLength=50))
    def query_poi(self, keywords: str, city: str | None = None) -> Any:
        """Find a place (POI, address, landmark) by name; returns its location "lon,lat", name and address."""
        return D.mobility_query_poi(D.plain(self.pack.geocode(keywords, None, 1)))

    @tool(
        **_OD,
        strategy={"items": lambda kit: {"type": "string", "enum": kit.strategies}, "maxItems": 2, "uniqueItems": True},
        waypoints={"items": {"type": "string", **_s(_COORD)}, "maxItems": 5},
    )
    def driving_route(
        self, origin: str, destination: str, strategy: Sequence[str] = (), waypoints: Sequence[str] = ()
    ) -> Any:
        """Driving route from origin to destination, optionally through waypoints and with up to two route
        preferences ({kit.strategy_list}). Returns distance (m), duration (s) and steps.

        Args:
            strategy: route preferences
            waypoints: intermediate stops in visiting order
        """
        avoid = sorted({x for s in strategy for x in STRATEGY_AVOID.get(s, [])})
        return self._route("drive", origin, destination, waypoints, avoid)

    @tool(**_OD)
    def walking_route(self, origin: str, destination: str) -> Any:
        """Walking route from origin to destination: distance (m), duration (s), steps."""
        return self._route("walk", origin, destination)

    @tool(**_OD)
    def bicycling_route(self, origin: str, destination: str) -> Any:
        """Cycling route from origin to destination: distance (m), duration (s), steps."""
        return self._route("bike", origin, destination)

    @tool(
        **_OD,
        strategy=_s(
            "transit preference: 0 fastest, 1 cheapest, 2 fewest transfers, 3 least walking, 5 no metro", enum=...
        ),
    )
    def bus_route(self, origin: str, destination: str, strategy: BusStrategy = "0") -> Any:
        """Public-transit plans (bus, tram, metro, train) from origin to destination; each plan lists its lines,
        transfers, walking distance and total duration."""
        raise NotImplementedError("recorded answers only")

    @tool(city=_s("city name", minLength=1, maxLength=50))
    def weather_query(self, city: str, need_forecast: bool = False) -> Any:
        """Current weather (or the forecast) for a city.

        Args:
            need_forecast: true for the coming days' forecast
        """
        raise NotImplementedError("recorded answers only")

    @tool(
        location=_s("centre, " + _COORD),
        keywords=_s("category or name to look for", minLength=1, maxLength=100),
        radius={"minimum": 1, "maximum": 50000},
    )
    def search_around_poi(self, location: str, keywords: str | None = None, radius: int = 10000) -> Any:
        """Places of a kind (keywords: a category or name, e.g. cafe, pharmacy) around a location, nearest first.

        Args:
            radius: search radius in metres
        """
        lat, lon = parse_lonlat(location)  # type: ignore[misc]
        return D.mobility_search_around(D.plain(self.pack.nearby(lat, lon, radius, None, keywords, 10)))

    @tool(
        longitude=_s("longitude as a decimal string"),
        latitude=_s("latitude as a decimal string"),
        radius={"minimum": 1, "maximum": 50000},
    )
    def reverse_geocoding(self, longitude: str, latitude: str, radius: int = 1000) -> Any:
        """Address at a coordinate (e.g. the user's current location).

        Args:
            radius: search radius in metres
        """
        return D.mobility_reverse_geocoding(self.pack.reverse_geocode(float(latitude), float(longitude)))

    @tool(name=_s("road name", minLength=1, maxLength=100), city=_s("city name", minLength=1, maxLength=50))
    def traffic_status(self, name: str, city: str) -> Any:
        """Current traffic on a named road in a city."""
        raise NotImplementedError("recorded answers only")

    @property
    def strategy_list(self) -> str:
        return ", ".join(self.strategies)

    def _route(
        self, mode: str, origin: str, destination: str, waypoints: Sequence[str] = (), avoid: Sequence[str] = ()
    ) -> Any:
        pts = [parse_lonlat(origin), *(parse_lonlat(w) for w in waypoints), parse_lonlat(destination)]
        route = self.pack.route(pts, mode, list(avoid))
        return D.mobility_envelope(True, _compact_route(D.amap_direction(route), route))


def agent_tools(lang: str = "en") -> list[ToolSpec]:
    return MobilityTools(lang).specs()


def canonical_args(name: str, args: Any) -> Any:
    """What the reference's lookup treats as equal: strategy order does not matter, strings are stripped."""
    if not isinstance(args, dict):
        return args
    out = {k: (v.strip() if isinstance(v, str) else v) for k, v in args.items()}
    if name == "driving_route" and isinstance(out.get("strategy"), list):
        out["strategy"] = sorted(out["strategy"], key=str)
    return out


class MobilityService:
    """The sandbox an agent talks to. ``sandbox``: ``replay`` (store only, misses are tool failures, as in the
    paper) or ``pack`` (store first, then the map pack for pack-answerable tools)."""

    def __init__(self, store: ReplayStore | None, pack: Any = None, sandbox: str = "replay", lang: str = "en") -> None:
        self.lang = lang
        self.extent = getattr(getattr(pack, "info", None), "extent", None)
        self.service = MapService(
            pack=pack, store=store, provider=PROVIDER, tools=MobilityTools(lang, pack if sandbox == "pack" else None)
        )

    @property
    def counts(self) -> Counter[str]:
        return self.service.counts

    def call(self, name: str, arguments: Any) -> ToolResult:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(
                    ok=False, error=f"arguments are not valid JSON: {exc.msg}", error_category="invalid_arguments"
                )
        if isinstance(arguments, dict) and name in TOOL_NAMES:
            errs = coordinate_errors(name, arguments, self.extent)
            if errs:
                self.service.counts["error:invalid_arguments"] += 1
                return ToolResult(ok=False, error="; ".join(errs), error_category="invalid_arguments")
        res = self.service.call(name, canonical_args(name, arguments))
        if res.ok and isinstance(res.data, dict) and res.data.get("status") == 1:
            # A recorded FAILED envelope is a tool failure for the agent, as in the reference.
            return res.model_copy(
                update={
                    "ok": False,
                    "error": str(res.data.get("error") or "tool failed"),
                    "error_category": "not_found",
                }
            )
        return res
