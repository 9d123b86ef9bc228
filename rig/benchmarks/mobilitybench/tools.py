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
from typing import Any

from rig.maps import dialects as D
from rig.maps.geo import compass
from rig.maps.replay import CoordField, KeySpec, ReplayPolicy, ReplayStore
from rig.maps.tools import MapService, ToolRegistry, ToolResult, ToolSpec
from rig.records import ToolSpec as AgentToolSpec

PROVIDER = "mobilitybench"
TOOL_NAMES: tuple[str, ...] = ("query_poi", "driving_route", "walking_route", "bicycling_route", "bus_route",
                               "weather_query", "search_around_poi", "reverse_geocoding", "traffic_status")
ROUTE_TOOLS = ("driving_route", "walking_route", "bicycling_route", "bus_route")
ROUTE_MODE = {"driving_route": "drive", "walking_route": "walk", "bicycling_route": "bike"}
# The ground truth of the upstream data names the traffic tool differently from the sandbox.
GT_ALIASES = {"traffic_status_road_api": "traffic_status"}

# Driving preferences: the reference's six options, in English for the authored pack (same order).
STRATEGIES_ZH = ("躲避拥堵", "高速优先", "不走高速", "少收费", "大路优先", "速度最快")
STRATEGIES_EN = ("avoid_congestion", "highways_first", "avoid_highways", "avoid_tolls", "main_roads_first", "fastest")
STRATEGY_ZH_TO_EN = dict(zip(STRATEGIES_ZH, STRATEGIES_EN))
# What the offline router can honour; the others return the default route (no live traffic, no road classes).
STRATEGY_AVOID = {"avoid_highways": ["highways"], "avoid_tolls": ["tolls"], "不走高速": ["highways"], "少收费": ["tolls"]}
BUS_STRATEGIES = ("0", "1", "2", "3", "4", "5", "7", "8")
NEAREST_M = 100.0  # nearest-coordinate fallback bound (the reference's 0.001 degree box is ~55-111 m here)
FUZZY_NAME = 85.0

_COORD = "a coordinate as the string \"lon,lat\" (longitude first), e.g. \"24.941000,60.170000\""


def _s(desc: str, **kw: Any) -> dict[str, Any]:
    return {"type": "string", "description": desc, **kw}


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def schemas(lang: str = "en") -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (description, JSON schema), in the reference's registration order."""
    strategies = list(STRATEGIES_ZH if lang == "zh" else STRATEGIES_EN)
    od = {"origin": _s("start, " + _COORD), "destination": _s("end, " + _COORD)}
    return {
        "query_poi": ("Find a place (POI, address, landmark) by name; returns its location \"lon,lat\", name and "
                      "address.",
                      _obj({"keywords": _s("place name or keywords", minLength=2, maxLength=200),
                            "city": _s("city to search in", maxLength=50)}, ["keywords"])),
        "driving_route": ("Driving route from origin to destination, optionally through waypoints and with up to two "
                          f"route preferences ({', '.join(strategies)}). Returns distance (m), duration (s) and steps.",
                          _obj({**od,
                                "strategy": {"type": "array", "items": {"type": "string", "enum": strategies},
                                             "maxItems": 2, "uniqueItems": True, "default": [],
                                             "description": "route preferences"},
                                "waypoints": {"type": "array", "items": _s(_COORD), "maxItems": 5, "default": [],
                                              "description": "intermediate stops in visiting order"}},
                               ["origin", "destination"])),
        "walking_route": ("Walking route from origin to destination: distance (m), duration (s), steps.",
                          _obj(dict(od), ["origin", "destination"])),
        "bicycling_route": ("Cycling route from origin to destination: distance (m), duration (s), steps.",
                            _obj(dict(od), ["origin", "destination"])),
        "bus_route": ("Public-transit plans (bus, tram, metro, train) from origin to destination; each plan lists its "
                      "lines, transfers, walking distance and total duration.",
                      _obj({**od, "strategy": _s("transit preference: 0 fastest, 1 cheapest, 2 fewest transfers, "
                                                 "3 least walking, 5 no metro", enum=list(BUS_STRATEGIES),
                                                 default="0")}, ["origin", "destination"])),
        "weather_query": ("Current weather (or the forecast) for a city.",
                          _obj({"city": _s("city name", minLength=1, maxLength=50),
                                "need_forecast": {"type": "boolean", "default": False,
                                                  "description": "true for the coming days' forecast"}}, ["city"])),
        "search_around_poi": ("Places of a kind (keywords: a category or name, e.g. cafe, pharmacy) around a "
                              "location, nearest first.",
                              _obj({"location": _s("centre, " + _COORD),
                                    "keywords": _s("category or name to look for", minLength=1, maxLength=100),
                                    "radius": {"type": "integer", "minimum": 1, "maximum": 50000, "default": 10000,
                                               "description": "search radius in metres"}}, ["location"])),
        "reverse_geocoding": ("Address at a coordinate (e.g. the user's current location).",
                              _obj({"longitude": _s("longitude as a decimal string"),
                                    "latitude": _s("latitude as a decimal string"),
                                    "radius": {"type": "integer", "minimum": 1, "maximum": 50000, "default": 1000,
                                               "description": "search radius in metres"}},
                                   ["longitude", "latitude"])),
        "traffic_status": ("Current traffic on a named road in a city.",
                           _obj({"name": _s("road name", minLength=1, maxLength=100),
                                 "city": _s("city name", minLength=1, maxLength=50)}, ["name", "city"])),
    }


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
    "bus_route": KeySpec(coords=[CoordField(name="origin", order="lon,lat"),
                                 CoordField(name="destination", order="lon,lat")], ignore=["strategy"]),
    "weather_query": KeySpec(names=["city"], fuzzy_field="city"),
    "search_around_poi": KeySpec(coords=[CoordField(name="location", order="lon,lat")], names=["keywords"],
                                 ignore=["radius"]),
    "reverse_geocoding": KeySpec(coords=[CoordField(name="latitude", lon_arg="longitude")], ignore=["radius"]),
    "traffic_status": KeySpec(names=["name", "city"], fuzzy_field="name"),
}
POLICIES: dict[str, ReplayPolicy] = {
    "query_poi": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=FUZZY_NAME),
    "weather_query": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=FUZZY_NAME),
    "traffic_status": ReplayPolicy(fuzzy_names=True, fuzzy_threshold=FUZZY_NAME),
    **{n: ReplayPolicy(nearest=True, max_distance_m=NEAREST_M)
       for n in ("driving_route", "walking_route", "bicycling_route", "bus_route", "search_around_poi",
                 "reverse_geocoding")},
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
            errs.append(f"{path}: {value!r} is not \"lon,lat\" (two numbers, longitude in [-180, 180], "
                        "latitude in [-90, 90])")
            return
        lat, lon = p
        if extent is not None and not extent.contains(lat, lon, 0.5) and extent.contains(lon, lat, 0.5):
            errs.append(f"{path}: {value!r} looks like \"lat,lon\"; this tool takes \"lon,lat\" (longitude first)")

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
        except json.JSONDecodeError:
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
                step.update(instruction=steps[i].instruction, orientation=compass(steps[i].bearing_deg),
                            road_name=steps[i].street or "", action=nxt, assistant_action="")
    return resp


def _route_handler(tool: str):  # type: ignore[no-untyped-def]
    def run(pack: Any, a: dict[str, Any]) -> Any:
        pts = [parse_lonlat(a["origin"]), *(parse_lonlat(w) for w in a.get("waypoints", [])),
               parse_lonlat(a["destination"])]
        avoid = sorted({x for s in a.get("strategy", []) for x in STRATEGY_AVOID.get(s, [])})
        route = pack.route(pts, ROUTE_MODE[tool], avoid)
        return D.mobility_envelope(True, _compact_route(D.amap_direction(route), route))
    return run


def _poi(pack: Any, a: dict[str, Any]) -> Any:
    return D.mobility_query_poi(D.plain(pack.geocode(a["keywords"], None, 1)))


def _around(pack: Any, a: dict[str, Any]) -> Any:
    lat, lon = parse_lonlat(a["location"])  # type: ignore[misc]
    return D.mobility_search_around(D.plain(pack.nearby(lat, lon, a["radius"], None, a.get("keywords"), 10)))


def _regeo(pack: Any, a: dict[str, Any]) -> Any:
    return D.mobility_reverse_geocoding(pack.reverse_geocode(float(a["latitude"]), float(a["longitude"])))


HANDLERS = {"query_poi": _poi, "driving_route": _route_handler("driving_route"),
            "walking_route": _route_handler("walking_route"), "bicycling_route": _route_handler("bicycling_route"),
            "search_around_poi": _around, "reverse_geocoding": _regeo}
RECORDED_ONLY = ("bus_route", "weather_query", "traffic_status")


def registry(lang: str = "en", with_handlers: bool = True) -> ToolRegistry:
    specs = []
    for name, (desc, params) in schemas(lang).items():
        specs.append(ToolSpec(name=name, description=desc, parameters=params,
                              handler=HANDLERS.get(name) if with_handlers else None,
                              key_spec=KEY_SPECS[name], replay_policy=POLICIES[name]))
    return ToolRegistry(specs)


def agent_tools(lang: str = "en") -> list[AgentToolSpec]:
    return [AgentToolSpec(name=n, description=d, parameters=p) for n, (d, p) in schemas(lang).items()]


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
        self.service = MapService(pack=pack, store=store, provider=PROVIDER,
                                  registry=registry(lang, with_handlers=sandbox == "pack"))

    @property
    def counts(self):  # type: ignore[no-untyped-def]
        return self.service.counts

    def call(self, name: str, arguments: Any) -> ToolResult:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(ok=False, tool=str(name), error=f"arguments are not valid JSON: {exc.msg}",
                                  error_category="invalid_arguments")
        if isinstance(arguments, dict) and name in TOOL_NAMES:
            errs = coordinate_errors(name, arguments, self.extent)
            if errs:
                self.service.counts["error:invalid_arguments"] += 1
                return ToolResult(ok=False, tool=name, error="; ".join(errs), error_category="invalid_arguments")
        res = self.service.call(name, canonical_args(name, arguments))
        if res.ok and isinstance(res.data, dict) and res.data.get("status") == 1:
            # A recorded FAILED envelope is a tool failure for the agent, as in the reference.
            return res.model_copy(update={"ok": False, "error": str(res.data.get("error") or "tool failed"),
                                          "error_category": "not_found"})
        return res
