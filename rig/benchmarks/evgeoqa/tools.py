"""GeoRover's four tools (paper sec. 4.1) and the final-answer tool, over a World; one stateful executor per episode.

Tool names and argument names follow the upstream framework prompt (notes C2): coordinates are ``[lon, lat]`` lists,
``Change_Current_Location`` takes a distance in metres (a number or a numeric string) and a direction N/E/S/W.
Departures, all documented in the README: ``start_location`` may be left out (the executor keeps the agent's current
position, which is the state ChangeLocation moves), station records carry a ``station_id`` (the final answer names
stations by id), and a coordinate may also be written as the ``"lon,lat"`` string that Search_Stations returns.

Every failure is an ``ExecResult(ok=False)`` with a category, never an exception: ``invalid_arguments`` (malformed or
missing arguments, swapped coordinates), ``out_of_area`` (a point or a move outside the map), ``no_route``,
``unknown_tool``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from rig.agents.loop import ExecResult
from rig.benchmarks.evgeoqa.data import Setting, Station
from rig.benchmarks.evgeoqa.world import NoRoute, World
from rig.maps.dialects import georover_distance, georover_move
from rig.records import ToolSpec

SEARCH_STATIONS = "Search_Stations"
SEARCH_POIS = "Search_Nearby_POI"
CHANGE_LOCATION = "Change_Current_Location"
CAL_DISTANCE = "Cal_Distance"
FINAL = "Final_Answer"
TOOL_NAMES = (SEARCH_STATIONS, SEARCH_POIS, CHANGE_LOCATION, CAL_DISTANCE)
MAX_ANSWER = 3  # Hits@1/2/3 read the first three stations
MAX_MOVE_M = 100_000.0

_COORD = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
          "description": "[longitude, latitude]"}
_DIRECTIONS = {"N": "N", "NORTH": "N", "S": "S", "SOUTH": "S", "E": "E", "EAST": "E", "W": "W", "WEST": "W"}
_UNITS = {"": 1.0, "m": 1.0, "meter": 1.0, "meters": 1.0, "metre": 1.0, "metres": 1.0, "km": 1000.0,
          "kilometer": 1000.0, "kilometers": 1000.0, "kilometre": 1000.0, "kilometres": 1000.0}
_DISTANCE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def tool_specs(setting: Setting) -> list[ToolSpec]:
    """The four exploration tools and the final answer, with the radii of this dataset in their descriptions."""
    rs, rw = round(setting.search_radius_m), round(setting.walk_radius_m)
    dist = "driving distance" if setting.distance == "drive" else "distance (geodesic)"
    return [
        ToolSpec(name=SEARCH_STATIONS,
                 description=f"List the EV charging stations within {rs} meters of a coordinate, nearest first, "
                             "with station_id, name, coord (\"lon,lat\") and straight-line distance.",
                 parameters=_obj({"coord": _COORD}, ["coord"])),
        ToolSpec(name=SEARCH_POIS,
                 description=f"List the places (POIs) within walking distance ({rw} meters) of a coordinate, "
                             f"nearest first, at most {setting.poi_cap}, with name, type and distance.",
                 parameters=_obj({"coord": _COORD}, ["coord"])),
        ToolSpec(name=CHANGE_LOCATION,
                 description="Move from start_location (default: your current location) by a distance in meters "
                             "due north (N), east (E), south (S) or west (W); returns new_location [lon, lat].",
                 parameters=_obj({"start_location": _COORD,
                                  "distance": {"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 24}],
                                               "description": "meters"},
                                  "direction": {"type": "string", "enum": ["N", "E", "S", "W"]}},
                                 ["distance", "direction"])),
        ToolSpec(name=CAL_DISTANCE,
                 description=f"The {dist} in meters between two coordinates.",
                 parameters=_obj({"coord1": _COORD, "coord2": _COORD}, ["coord1", "coord2"])),
        ToolSpec(name=FINAL,
                 description=f"Give the final answer: up to {MAX_ANSWER} station_id values from Search_Stations, "
                             "best station first.",
                 parameters=_obj({"stations": {"type": "array", "minItems": 1, "maxItems": MAX_ANSWER,
                                               "items": {"type": "string", "minLength": 1, "maxLength": 64}}},
                                 ["stations"])),
    ]


class ArgError(ValueError):
    def __init__(self, message: str, category: str = "invalid_arguments") -> None:
        super().__init__(message)
        self.category = category


def _meters(m: float) -> str:
    return f"{round(m)} meters"


def _lonlat_str(lat: float, lon: float) -> str:
    return f"{lon:.6f},{lat:.6f}"


class GeoRoverExecutor:
    """Answers one episode's tool calls and remembers what the agent did: its position, moves, where it searched,
    which stations and POIs it has seen (the evidence the error analysis needs)."""

    def __init__(self, world: World, user_lat: float, user_lon: float) -> None:
        self.world = world
        self.user = (user_lat, user_lon)
        self.position = (user_lat, user_lon)
        self.moves: list[dict[str, Any]] = []  # {"from": [lat, lon], "to": [lat, lon], "ok": bool}
        self.searches: list[dict[str, Any]] = []  # {"tool", "lat", "lon"}
        self.seen_stations: dict[str, Station] = {}
        self.seen_poi_keys: set[str] = set()
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()

    def __call__(self, name: str, arguments: Any) -> ExecResult:
        self.calls[name] += 1
        try:
            if name not in TOOL_NAMES:
                raise ArgError(f"unknown tool {name!r}; use one of {', '.join((*TOOL_NAMES, FINAL))}", "unknown_tool")
            if not isinstance(arguments, dict):
                raise ArgError("arguments must be a JSON object")
            res = getattr(self, "_" + name.lower())(arguments)
        except ArgError as exc:
            self.errors[exc.category] += 1
            return ExecResult(ok=False, error=str(exc), error_category=exc.category)
        except NoRoute as exc:
            self.errors["no_route"] += 1
            return ExecResult(ok=False, error=str(exc), error_category="no_route")
        return ExecResult(ok=True, data=res, source=self.world.source)

    # -- argument checks ---------------------------------------------------------------------------------

    @staticmethod
    def _only(args: dict[str, Any], allowed: tuple[str, ...], required: tuple[str, ...]) -> None:
        extra = sorted(set(args) - set(allowed))
        if extra:
            raise ArgError(f"unknown argument(s) {extra}; this tool takes {', '.join(allowed)}")
        missing = [k for k in required if k not in args]
        if missing:
            raise ArgError(f"missing argument(s) {missing}")

    def _point(self, value: Any, field: str) -> tuple[float, float]:
        """A ``[lon, lat]`` list (or ``"lon,lat"``) inside the map, as (lat, lon)."""
        if isinstance(value, str):
            parts = value.replace(" ", "").split(",")
            try:
                value = [float(p) for p in parts]
            except ValueError:
                raise ArgError(f"{field}: {value[:40]!r} is not [lon, lat]") from None
        if (not isinstance(value, (list, tuple)) or len(value) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
            raise ArgError(f"{field}: expected [lon, lat] (two numbers), got {str(value)[:60]}")
        lon, lat = float(value[0]), float(value[1])
        if not (math.isfinite(lat) and math.isfinite(lon)):
            raise ArgError(f"{field}: coordinates must be finite numbers")
        ext = self.world.extent
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            if -90 <= lon <= 90 and -180 <= lat <= 180:
                raise ArgError(f"{field}: [{value[0]}, {value[1]}] is not a valid [lon, lat]; it looks like [lat, "
                               "lon]. Coordinates are [longitude, latitude]")
            raise ArgError(f"{field}: [{value[0]}, {value[1]}] is outside the valid range of [lon, lat]")
        if not ext.contains(lat, lon):
            if ext.contains(lon, lat):
                raise ArgError(f"{field}: [{value[0]}, {value[1]}] looks like [lat, lon]; coordinates are "
                               "[longitude, latitude]")
            raise ArgError(f"{field}: [{value[0]}, {value[1]}] is outside the map area ({self._area()})",
                           "out_of_area")
        return lat, lon

    def _area(self) -> str:
        e = self.world.extent
        return f"lon {e.min_lon:.4f}..{e.max_lon:.4f}, lat {e.min_lat:.4f}..{e.max_lat:.4f}"

    @staticmethod
    def _distance(value: Any) -> float:
        if isinstance(value, bool):
            raise ArgError("distance: expected meters as a number")
        if isinstance(value, (int, float)):
            d = float(value)
        elif isinstance(value, str):
            m = _DISTANCE_RE.match(value)
            if not m or m.group(2).lower() not in _UNITS:
                raise ArgError(f"distance: {value[:30]!r} is not a distance in meters")
            d = float(m.group(1)) * _UNITS[m.group(2).lower()]
        else:
            raise ArgError("distance: expected meters as a number")
        if not (math.isfinite(d) and 0 < d <= MAX_MOVE_M):
            raise ArgError(f"distance: {value!r} must be more than 0 and at most {MAX_MOVE_M:.0f} meters")
        return d

    # -- tools -------------------------------------------------------------------------------------------

    def _search_stations(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        self._only(args, ("coord",), ("coord",))
        lat, lon = self._point(args["coord"], "coord")
        self.searches.append({"tool": SEARCH_STATIONS, "lat": lat, "lon": lon})
        out = []
        for s, d in self.world.stations_near(lat, lon):
            self.seen_stations.setdefault(s.station_id, s)
            out.append({"station_id": s.station_id, "station_name": s.name, "address": s.address,
                        "coord": _lonlat_str(s.lat, s.lon), "station_distance": _meters(d)})
        return out

    def _search_nearby_poi(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        self._only(args, ("coord",), ("coord",))
        lat, lon = self._point(args["coord"], "coord")
        self.searches.append({"tool": SEARCH_POIS, "lat": lat, "lon": lon})
        out = []
        for p in self.world.pois_near(lat, lon):
            self.seen_poi_keys.add(p.key)
            out.append({"poi_name": p.name, "type": p.type, "address": p.address,
                        "poi_distance": _meters(p.distance_m)})
        return out

    def _change_current_location(self, args: dict[str, Any]) -> dict[str, Any]:
        self._only(args, ("start_location", "distance", "direction"), ("distance", "direction"))
        start = self._point(args["start_location"], "start_location") if "start_location" in args else self.position
        d = self._distance(args["distance"])
        direction = args["direction"]
        if not isinstance(direction, str) or direction.strip().upper() not in _DIRECTIONS:
            raise ArgError(f"direction: {str(direction)[:20]!r} is not one of N, E, S, W")
        moved = georover_move(start[0], start[1], d, _DIRECTIONS[direction.strip().upper()])
        lon, lat = moved["new_location"]
        if not self.world.extent.contains(lat, lon):
            self.moves.append({"from": list(start), "to": [lat, lon], "ok": False})
            raise ArgError(f"moving {round(d)} meters {_DIRECTIONS[direction.strip().upper()]} leaves the map area "
                           f"({self._area()}); your location is unchanged", "out_of_area")
        self.moves.append({"from": list(start), "to": [lat, lon], "ok": True})
        self.position = (lat, lon)
        return moved

    def _cal_distance(self, args: dict[str, Any]) -> dict[str, str]:
        self._only(args, ("coord1", "coord2"), ("coord1", "coord2"))
        a = self._point(args["coord1"], "coord1")
        b = self._point(args["coord2"], "coord2")
        return georover_distance(self.world.distance(a, b))

    def trace(self) -> dict[str, Any]:
        """What the plot and the error analysis read back from the episode's output."""
        return {"user": list(self.user), "position": list(self.position), "moves": self.moves,
                "searches": self.searches,
                "seen_stations": {k: [s.lat, s.lon] for k, s in self.seen_stations.items()},
                "seen_poi_keys": sorted(self.seen_poi_keys), "calls": dict(self.calls), "errors": dict(self.errors)}
