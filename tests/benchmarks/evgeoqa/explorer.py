"""A scripted explorer: the systematic search the framework prompt suggests, as a stand-in model.

It reads the conversation (prompt-based tool modes: the calls it wrote, then ``Result of <tool>: ...`` turns) and
decides the next call: Search_Stations where it stands; Search_Nearby_POI at every station found; when a station is
suitable, Cal_Distance from the user to each suitable one and Final_Answer by driving distance; otherwise it moves to
the next point of a grid over the map (spacing = search radius x sqrt(2), so the search circles cover the plane;
nearest points first, each reached by one N/S and one E/W move). Used as an oracle by the tests.
It knows each question's intent categories (an oracle), not the answers.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rig.benchmarks.evgeoqa.data import Setting, poi_categories
from rig.benchmarks.evgeoqa.tools import CAL_DISTANCE, CHANGE_LOCATION, FINAL, SEARCH_POIS, SEARCH_STATIONS
from rig.maps.geo import EARTH_RADIUS_M, haversine_m
from rig.maps.records import Extent
from rig.records import ChatRequest

_DEG = math.pi / 180


class ScriptedExplorer:
    """``FakeEngine(answer=ScriptedExplorer(...))``; ``questions`` maps a question's text to its intent categories
    (``key=value``, as POI types are written ``key;value``)."""

    def __init__(self, questions: dict[str, list[str]], setting: Setting, extent: Extent) -> None:
        self.questions = questions
        self.setting = setting
        self.extent = extent

    def __call__(self, request: ChatRequest) -> str:
        name, args = self.decide(request)
        return json.dumps({"name": name, "arguments": args})

    # -- reading the conversation ------------------------------------------------------------------------

    def _history(self, request: ChatRequest) -> tuple[str, tuple[float, float], list[tuple[str, dict, Any]]]:
        question, user = "", (0.0, 0.0)
        calls: list[tuple[str, dict, Any]] = []
        pending: tuple[str, dict] | None = None
        for m in request.messages:
            text = m.content
            if m.role == "user" and text.startswith("Question: "):
                question = text.split("\n", 1)[0][len("Question: ") :]
                coord = text.rsplit("[lon, lat]: ", 1)[1]
                lon, lat = json.loads(coord)
                user = (lat, lon)
            elif m.role == "assistant":
                try:
                    c = json.loads(text)
                    pending = (c["name"], c.get("arguments") or {})
                except (ValueError, KeyError, TypeError):
                    pending = None
            elif m.role in ("user", "tool") and pending and text.startswith(f"Result of {pending[0]}: "):
                payload = json.loads(text.split(": ", 1)[1])
                calls.append((pending[0], pending[1], payload))
                pending = None
        return question, user, calls

    def _grid(self, user: tuple[float, float]) -> list[tuple[float, float]]:
        step = self.setting.search_radius_m * math.sqrt(2) * 0.95
        e = self.extent
        dlat = step / EARTH_RADIUS_M / _DEG
        dlon = dlat / math.cos(user[0] * _DEG)
        pts = []
        i = math.floor((e.min_lat - user[0]) / dlat)
        while user[0] + i * dlat <= e.max_lat:
            j = math.floor((e.min_lon - user[1]) / dlon)
            while user[1] + j * dlon <= e.max_lon:
                p = (user[0] + i * dlat, user[1] + j * dlon)
                if (i or j) and e.contains(*p):
                    pts.append(p)
                j += 1
            i += 1
        return sorted(pts, key=lambda p: haversine_m(user[0], user[1], p[0], p[1]))

    @staticmethod
    def _leg(pos: tuple[float, float], target: tuple[float, float]) -> dict[str, Any] | None:
        """The next move towards target: north/south first, then east/west; None when already there."""
        dn = haversine_m(pos[0], pos[1], target[0], pos[1])
        if dn >= 1.0:
            return {"distance": round(dn, 1), "direction": "N" if target[0] > pos[0] else "S"}
        de = haversine_m(pos[0], pos[1], pos[0], target[1])
        if de >= 1.0:
            return {"distance": round(de, 1), "direction": "E" if target[1] > pos[1] else "W"}
        return None

    # -- policy --------------------------------------------------------------------------------------------

    def decide(self, request: ChatRequest) -> tuple[str, dict[str, Any]]:
        question, user, calls = self._history(request)
        cats = set(self.questions.get(question) or [])
        pos = user
        searched_here = False
        stations: dict[str, tuple[float, float]] = {}  # id -> (lon, lat), in the order found
        checked: dict[str, bool] = {}
        dist: dict[str, float] = {}
        searched: list[tuple[float, float]] = []
        failed: set[tuple[tuple[float, float], Any, Any]] = set()  # (where, direction, distance as the model wrote)
        for name, args, payload in calls:
            if isinstance(payload, dict) and "error" in payload:
                if name == CHANGE_LOCATION:
                    failed.add((pos, args.get("direction"), args.get("distance")))
                continue
            if name == SEARCH_STATIONS:
                searched_here = True
                searched.append(pos)
                for s in payload:
                    lon, lat = (float(x) for x in s["coord"].split(","))
                    stations.setdefault(s["station_id"], (lon, lat))
            elif name == SEARCH_POIS:
                at = tuple(args["coord"])
                for sid, c in stations.items():
                    if sid not in checked and math.isclose(c[0], at[0]) and math.isclose(c[1], at[1]):
                        checked[sid] = any(poi_categories(*p["type"].split(";", 1)) & cats for p in payload)
            elif name == CHANGE_LOCATION:  # only successful moves reach here
                lon, lat = payload["new_location"]
                pos = (lat, lon)
                searched_here = False
            elif name == CAL_DISTANCE:
                at = tuple(args["coord2"])
                for sid, c in stations.items():
                    if math.isclose(c[0], at[0]) and math.isclose(c[1], at[1]):
                        dist[sid] = float(payload["distance"].split()[0])
        for sid, c in stations.items():
            if sid not in checked:
                return SEARCH_POIS, {"coord": [c[0], c[1]]}
        good = [sid for sid, ok in checked.items() if ok]
        if good:
            for sid in good:
                if sid not in dist:
                    return CAL_DISTANCE, {"coord1": [user[1], user[0]], "coord2": list(stations[sid])}
            return FINAL, {"stations": sorted(good, key=lambda s: (dist[s], s))[:3]}
        grid = self._grid(user)
        at_point = any(haversine_m(pos[0], pos[1], p[0], p[1]) < 1.0 for p in [user, *grid])
        if not searched_here and at_point:  # not halfway (after the north/south leg of a grid move)
            return SEARCH_STATIONS, {"coord": [pos[1], pos[0]]}
        for target in grid:
            if any(haversine_m(target[0], target[1], p[0], p[1]) < 1.0 for p in searched):
                continue
            move = self._leg(pos, target)
            if move is None or (pos, move["direction"], move["distance"]) in failed:
                continue  # already here (searched above) or this way is refused: next grid point
            return CHANGE_LOCATION, move
        return FINAL, {"stations": list(stations)[:3] or ["none"]}
