"""GeoRover's four tools (paper sec. 4.1) and the final-answer tool, over a World; one stateful executor per episode.

Tool names and argument names follow the upstream framework prompt (notes C2): coordinates are ``[lon, lat]`` lists,
``Change_Current_Location`` takes a distance in metres (a number or a numeric string) and a direction N/E/S/W.
Departures, all documented in the README: ``start_location`` may be left out (the executor keeps the agent's current
position, which is the state ChangeLocation moves), station records carry a ``station_id`` (the final answer names
stations by id), and a coordinate may also be written as the ``"lon,lat"`` string that Search_Stations returns.

Every failure is a ``ToolResult(ok=False)`` with a category, never an exception: ``invalid_arguments`` (malformed or
missing arguments, swapped coordinates), ``out_of_area`` (a point or a move outside the map), ``no_route``,
``unknown_tool``.
"""

from __future__ import annotations

import inspect
import math
import re
import reprlib
from collections import Counter
from types import SimpleNamespace
from typing import Any, Literal

from rig.agents.toolkit import Toolkit, tool
from rig.benchmarks.evgeoqa.data import Setting, Station
from rig.benchmarks.evgeoqa.world import NoRoute, World
from rig.maps.dialects import georover_distance, georover_move
from rig.records import ToolResult, ToolSpec

SEARCH_STATIONS = "Search_Stations"
SEARCH_POIS = "Search_Nearby_POI"
CHANGE_LOCATION = "Change_Current_Location"
CAL_DISTANCE = "Cal_Distance"
FINAL = "Final_Answer"
TOOL_NAMES = (SEARCH_STATIONS, SEARCH_POIS, CHANGE_LOCATION, CAL_DISTANCE)
MAX_ANSWER = 3  # Hits@1/2/3 read the first three stations
MAX_MOVE_M = 100_000.0

_DIRECTIONS = {"N": "N", "NORTH": "N", "S": "S", "SOUTH": "S", "E": "E", "EAST": "E", "W": "W", "WEST": "W"}
_UNITS = {
    "": 1.0,
    "m": 1.0,
    "meter": 1.0,
    "meters": 1.0,
    "metre": 1.0,
    "metres": 1.0,
    "km": 1000.0,
    "kilometer": 1000.0,
    "kilometers": 1000.0,
    "kilometre": 1000.0,
    "kilometres": 1000.0,
}
_DISTANCE_RE = re.compile(r"^\s*+([0-9]++(?:\.[0-9]++)?)\s*+([a-zA-Z]*+)\s*+$")  # possessive: linear time


def tool_specs(setting: Setting) -> list[ToolSpec]:
    """The four exploration tools and the final answer, with the radii of this dataset in their descriptions."""
    return GeoRoverExecutor.tool_specs(_quoted(setting))


def _quoted(setting: Setting) -> SimpleNamespace:
    """The setting's values as the tool descriptions quote them."""
    return SimpleNamespace(
        search_m=round(setting.search_radius_m),
        walk_m=round(setting.walk_radius_m),
        poi_cap=setting.poi_cap,
        max_answer=MAX_ANSWER,
        distance="driving distance" if setting.distance == "drive" else "distance (geodesic)",
    )


_COORD = {"minItems": 2, "maxItems": 2}  # a [lon, lat] pair; the executor also takes "lon,lat"


class ArgError(ValueError):
    def __init__(self, message: str, category: str = "invalid_arguments") -> None:
        super().__init__(message)
        self.category = category


def _meters(m: float) -> str:
    return f"{round(m)} meters"


def _lonlat_str(lat: float, lon: float) -> str:
    return f"{lon:.6f},{lat:.6f}"


class GeoRoverExecutor(Toolkit):
    """Answers one episode's tool calls and remembers what the agent did: its position, moves, where it searched,
    which stations and POIs it has seen (the evidence the error analysis needs).

    The tools check their arguments themselves, more leniently than their schemas say (a coordinate may be the
    ``"lon,lat"`` string Search_Stations returns, a distance a string with a unit)."""

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

    def specs(self) -> list[ToolSpec]:
        return self.tool_specs(_quoted(self.world.setting))

    def __call__(self, name: str, arguments: Any) -> ToolResult:
        self.calls[name] += 1
        try:
            method = self.method(name) if name in TOOL_NAMES else None
            if method is None:
                raise ArgError(f"unknown tool {name!r}; use one of {', '.join((*TOOL_NAMES, FINAL))}", "unknown_tool")
            if not isinstance(arguments, dict):
                raise ArgError("arguments must be a JSON object")
            params = inspect.signature(method).parameters
            self._only(arguments, tuple(params), tuple(k for k, p in params.items() if p.default is p.empty))
            for k, v in arguments.items():
                if v is None and params[k].default is None:
                    self._point(v, k)  # an explicit null is a malformed coordinate, not a left-out one
            res = method(**arguments)
        except ArgError as exc:
            self.errors[exc.category] += 1
            return ToolResult(ok=False, error=str(exc), error_category=exc.category)
        except NoRoute as exc:
            self.errors["no_route"] += 1
            return ToolResult(ok=False, error=str(exc), error_category="no_route")
        return ToolResult(ok=True, data=res, meta={"source": self.world.source} if self.world.source else {})

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
        if (
            not isinstance(value, (list, tuple))
            or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        ):
            raise ArgError(f"{field}: expected [lon, lat] (two numbers), got {reprlib.repr(value)}")
        try:
            lon, lat = float(value[0]), float(value[1])
        except OverflowError:  # an integer too large for a float
            lon = lat = math.inf
        if not (math.isfinite(lat) and math.isfinite(lon)):
            raise ArgError(f"{field}: coordinates must be finite numbers")
        ext = self.world.extent
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            if -90 <= lon <= 90 and -180 <= lat <= 180:
                raise ArgError(
                    f"{field}: [{value[0]}, {value[1]}] is not a valid [lon, lat]; it looks like [lat, "
                    "lon]. Coordinates are [longitude, latitude]"
                )
            raise ArgError(f"{field}: [{value[0]}, {value[1]}] is outside the valid range of [lon, lat]")
        if not ext.contains(lat, lon):
            if ext.contains(lon, lat):
                raise ArgError(
                    f"{field}: [{value[0]}, {value[1]}] looks like [lat, lon]; coordinates are [longitude, latitude]"
                )
            raise ArgError(f"{field}: [{value[0]}, {value[1]}] is outside the map area ({self._area()})", "out_of_area")
        return lat, lon

    def _area(self) -> str:
        e = self.world.extent
        return f"lon {e.min_lon:.4f}..{e.max_lon:.4f}, lat {e.min_lat:.4f}..{e.max_lat:.4f}"

    @staticmethod
    def _distance(value: Any) -> float:
        if isinstance(value, bool):
            raise ArgError("distance: expected meters as a number")
        if isinstance(value, (int, float)):
            try:
                d = float(value)
            except OverflowError:
                raise ArgError(f"distance: a number too large (at most {MAX_MOVE_M:.0f} meters)") from None
        elif isinstance(value, str):
            m = _DISTANCE_RE.match(value)
            if not m or m.group(2).lower() not in _UNITS:
                raise ArgError(f"distance: {value[:30]!r} is not a distance in meters")
            d = float(m.group(1)) * _UNITS[m.group(2).lower()]
        else:
            raise ArgError("distance: expected meters as a number")
        if not (math.isfinite(d) and 0 < d <= MAX_MOVE_M):
            raise ArgError(f"distance: {reprlib.repr(value)} must be more than 0 and at most {MAX_MOVE_M:.0f} meters")
        return d

    # -- tools -------------------------------------------------------------------------------------------

    @tool(SEARCH_STATIONS, coord=_COORD)
    def search_stations(self, coord: list[float]) -> list[dict[str, Any]]:
        """List the EV charging stations within {kit.search_m} meters of a coordinate, nearest first, with
        station_id, name, coord ("lon,lat") and straight-line distance.

        Args:
            coord: [longitude, latitude]
        """
        lat, lon = self._point(coord, "coord")
        self.searches.append({"tool": SEARCH_STATIONS, "lat": lat, "lon": lon})
        out = []
        for s, d in self.world.stations_near(lat, lon):
            self.seen_stations.setdefault(s.station_id, s)
            out.append(
                {
                    "station_id": s.station_id,
                    "station_name": s.name,
                    "address": s.address,
                    "coord": _lonlat_str(s.lat, s.lon),
                    "station_distance": _meters(d),
                }
            )
        return out

    @tool(SEARCH_POIS, coord=_COORD)
    def search_nearby_poi(self, coord: list[float]) -> list[dict[str, Any]]:
        """List the places (POIs) within walking distance ({kit.walk_m} meters) of a coordinate, nearest first, at
        most {kit.poi_cap}, with name, type and distance.

        Args:
            coord: [longitude, latitude]
        """
        lat, lon = self._point(coord, "coord")
        self.searches.append({"tool": SEARCH_POIS, "lat": lat, "lon": lon})
        out = []
        for p in self.world.pois_near(lat, lon):
            self.seen_poi_keys.add(p.key)
            out.append(
                {"poi_name": p.name, "type": p.type, "address": p.address, "poi_distance": _meters(p.distance_m)}
            )
        return out

    @tool(
        CHANGE_LOCATION,
        start_location=_COORD,
        distance={"anyOf": [{"type": "number"}, {"type": "string", "maxLength": 24}]},
    )
    def change_current_location(
        self,
        start_location: list[float] | None = None,
        *,
        distance: float | str,
        direction: Literal["N", "E", "S", "W"],
    ) -> dict[str, Any]:
        """Move from start_location (default: your current location) by a distance in meters due north (N), east
        (E), south (S) or west (W); returns new_location [lon, lat].

        Args:
            start_location: [longitude, latitude]
            distance: meters
        """
        start = self._point(start_location, "start_location") if start_location is not None else self.position
        d = self._distance(distance)
        if not isinstance(direction, str) or direction.strip().upper() not in _DIRECTIONS:
            raise ArgError(f"direction: {str(direction)[:20]!r} is not one of N, E, S, W")
        moved = georover_move(start[0], start[1], d, _DIRECTIONS[direction.strip().upper()])
        lon, lat = moved["new_location"]
        if not self.world.extent.contains(lat, lon):
            self.moves.append({"from": list(start), "to": [lat, lon], "ok": False})
            raise ArgError(
                f"moving {round(d)} meters {_DIRECTIONS[direction.strip().upper()]} leaves the map area "
                f"({self._area()}); your location is unchanged",
                "out_of_area",
            )
        self.moves.append({"from": list(start), "to": [lat, lon], "ok": True})
        self.position = (lat, lon)
        return moved

    @tool(CAL_DISTANCE, coord1=_COORD, coord2=_COORD)
    def cal_distance(self, coord1: list[float], coord2: list[float]) -> dict[str, str]:
        """The {kit.distance} in meters between two coordinates.

        Args:
            coord1: [longitude, latitude]
            coord2: [longitude, latitude]
        """
        return georover_distance(self.world.distance(self._point(coord1, "coord1"), self._point(coord2, "coord2")))

    @tool(
        FINAL,
        stations={"minItems": 1, "maxItems": MAX_ANSWER, "items": {"type": "string", "minLength": 1, "maxLength": 64}},
    )
    def final_answer(self, stations: list[str]) -> list[str]:
        """Give the final answer: up to {kit.max_answer} station_id values from Search_Stations, best station
        first."""
        return stations  # the loop ends the episode on this call; it is never executed

    def trace(self) -> dict[str, Any]:
        """What the plot and the error analysis read back from the episode's output."""
        return {
            "user": list(self.user),
            "position": list(self.position),
            "moves": self.moves,
            "searches": self.searches,
            "seen_stations": {k: [s.lat, s.lon] for k, s in self.seen_stations.items()},
            "seen_poi_keys": sorted(self.seen_poi_keys),
            "calls": dict(self.calls),
            "errors": dict(self.errors),
        }
