"""EVGeoQA's gold and anti-gold agents for `rig selftest`, played through GeoRover's own loop and tools.

Gold walks to each ground-truth station in turn (at most the three Hits@K reads), finds it with Search_Stations,
confirms the activity with Search_Nearby_POI at the station's coordinate as Search_Stations returned it, measures it
with Cal_Distance, and answers the stations in ground-truth order. Every step is decided from the ground truth and
the conversation so far (its own calls and the tools' real answers), never from the tools' internals: a station the
tools do not show where the data puts it stays out of the answer, and the episode falls short instead of passing by
fiat (upstream data aside, see ``gold``).

Anti-gold makes one well-formed search and answers stations that match no ground-truth station (nor share a site
with one), or an id no station has when the map has no other station."""

from __future__ import annotations

import json
from typing import Any

import yaml

from rig.agents.scripted import Action, Call, Player
from rig.benchmarks.base import GoldUnavailable, MetricRole
from rig.benchmarks.evgeoqa.data import AnswerStation, Query
from rig.benchmarks.evgeoqa.scoring import StationIndex, match
from rig.benchmarks.evgeoqa.tools import (
    CAL_DISTANCE,
    CHANGE_LOCATION,
    FINAL,
    MAX_ANSWER,
    SEARCH_POIS,
    SEARCH_STATIONS,
)
from rig.benchmarks.evgeoqa.world import World
from rig.maps.geo import haversine_m
from rig.records import ChatRequest, Message

# A move stops once the target is this share of the search radius away: the search from there certainly reaches it.
_CLOSE_ENOUGH = 0.5
_REACH = 0.9  # a station this share of the search radius away is searched for from where the agent stands
_SAME_SPOT_M = 1.0
_USER_COORD = "User coordinate [lon, lat]: "  # how the user turn shows it (agents.user_prompt)
Step = tuple[str, dict[str, Any], Any]  # a call the agent made and what the tool answered


def history(request: ChatRequest) -> list[Step]:
    """The calls made so far and their answers, read from the conversation in any tool mode: an assistant turn holds
    the call (native: a JSON list of calls; prompt and json: the envelope; yaml: the envelope as YAML), the turn
    after it the answer (a tool message, or a user turn ``Result of <tool>: <JSON>``)."""
    steps: list[Step] = []
    pending: tuple[str, dict[str, Any]] | None = None
    for m in request.messages:
        if m.role == "assistant":
            pending = _call_of(m)
        elif pending is not None and (answer := _answer_of(m, pending[0])) is not None:
            steps.append((*pending, answer))
            pending = None
    return steps


def _call_of(m: Message) -> tuple[str, dict[str, Any]] | None:
    try:
        value = yaml.safe_load(m.content)  # JSON is YAML: one reader for every mode's text
    except yaml.YAMLError:
        return None
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("arguments"), dict):
        return value["name"], value["arguments"]
    return None


def _answer_of(m: Message, name: str) -> Any:
    if m.role == "tool" and m.name == name:
        text = m.content
    elif m.role == "user" and m.content.startswith(f"Result of {name}: "):
        text = m.content[len(f"Result of {name}: ") :]
    else:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"error": "unreadable answer"}  # e.g. cut at the observation limit: not a usable observation


def _lonlat(text: Any) -> tuple[float, float] | None:
    """A ``"lon,lat"`` coordinate as Search_Stations writes it."""
    try:
        lon, lat = (float(x) for x in str(text).split(","))
    except ValueError:
        return None
    return lon, lat


def _same(a: Any, b: tuple[float, float]) -> bool:
    return isinstance(a, list) and len(a) == 2 and abs(a[0] - b[0]) < 1e-9 and abs(a[1] - b[1]) < 1e-9


class GoldState:
    """What the conversation shows: where the agent stands, where it searched, the stations it saw (id -> (lon,
    lat) as returned), the places listed at each station it checked, and which stations it measured."""

    def __init__(self, user: tuple[float, float], steps: list[Step]) -> None:
        self.user = user
        self.pos = self.user
        self.searched: list[tuple[float, float]] = []
        self.seen: dict[str, tuple[float, float]] = {}
        self.pois: dict[str, set[str]] = {}  # station id -> the names Search_Nearby_POI showed at it
        self.measured: set[str] = set()
        self.refused: set[tuple[tuple[float, float], str, float]] = set()  # moves a tool refused, from where
        for name, args, answer in steps:  # a refused call counts as tried (nothing shown), so it is not repeated
            listed = answer if isinstance(answer, list) else []
            if name == SEARCH_STATIONS:
                self.searched.append(self.pos)
                for s in listed:
                    at = _lonlat(s.get("coord")) if isinstance(s, dict) else None
                    if at is not None:
                        self.seen.setdefault(str(s.get("station_id")), at)
            elif name == CHANGE_LOCATION:
                moved = answer.get("new_location") if isinstance(answer, dict) else None
                if isinstance(moved, list) and len(moved) == 2:
                    self.pos = (moved[1], moved[0])
                else:
                    self.refused.add((self.pos, str(args.get("direction")), float(args.get("distance") or 0)))
            elif name == SEARCH_POIS:
                names = {str(p.get("poi_name")) for p in listed if isinstance(p, dict)}
                for sid in [sid for sid, at in self.seen.items() if _same(args.get("coord"), at)]:
                    self.pois[sid] = names
            elif name == CAL_DISTANCE:
                self.measured |= {sid for sid, at in self.seen.items() if _same(args.get("coord2"), at)}

    def searched_here(self) -> bool:
        return any(haversine_m(*self.pos, *p) < _SAME_SPOT_M for p in self.searched)


def _toward(pos: tuple[float, float], target: AnswerStation) -> dict[str, Any] | None:
    """One Change_Current_Location leg towards the target: north/south first, then east/west."""
    dn = haversine_m(pos[0], pos[1], target.lat, pos[1])
    if dn >= _SAME_SPOT_M:
        return {"distance": round(dn, 1), "direction": "N" if target.lat > pos[0] else "S"}
    de = haversine_m(pos[0], pos[1], pos[0], target.lon)
    if de >= _SAME_SPOT_M:
        return {"distance": round(de, 1), "direction": "E" if target.lon > pos[1] else "W"}
    return None


def user_coordinate(request: ChatRequest, q: Query) -> tuple[float, float]:
    """The user's (lat, lon) as the prompt shows it (rounded to 6 decimals), which is all an agent knows; the
    query's own when no user turn shows one."""
    for m in request.messages:
        _, sep, tail = m.content.rpartition(_USER_COORD)
        if m.role == "user" and sep:
            try:
                lon, lat = json.loads(tail.strip())
                return float(lat), float(lon)
            except (ValueError, TypeError):
                break
    return q.lat, q.lon


def _next(q: Query, targets: list[AnswerStation], search_m: float, budget: int, request: ChatRequest) -> Action:
    steps = history(request)
    st = GoldState(user_coordinate(request, q), steps)
    for t in targets if len(steps) < budget - 1 else []:  # the last step of the budget is the answer
        if t.station_id not in st.seen:
            d = haversine_m(*st.pos, t.lat, t.lon)
            if d <= _REACH * search_m and not st.searched_here():
                return Call(SEARCH_STATIONS, {"coord": [st.pos[1], st.pos[0]]})
            move = None if d <= _CLOSE_ENOUGH * search_m else _toward(st.pos, t)
            if move is None or (st.pos, move["direction"], move["distance"]) in st.refused:
                continue  # searched where the data puts it (or refused the way) and not shown: left out
            return Call(CHANGE_LOCATION, move)
        at = list(st.seen[t.station_id])
        if t.station_id not in st.pois:
            return Call(SEARCH_POIS, {"coord": at})
        if t.station_id not in st.measured:
            return Call(CAL_DISTANCE, {"coord1": [st.user[1], st.user[0]], "coord2": at})
    # Only what the tools showed: a station seen, with a ground-truth place among the POIs listed at it (any place
    # when the data names none). Nothing shown: an answer that names no station, so the shortfall is reported.
    found = [t.station_id for t in targets if _suitable(st.pois.get(t.station_id), t)]
    return Call(FINAL, {"stations": found or ["none found"]})


def _suitable(listed: set[str] | None, t: AnswerStation) -> bool:
    """Places were listed at the station, the ground truth's own among them when the data names it."""
    return listed is not None and bool(listed) and (not t.poi_names or bool(listed & set(t.poi_names)))


def _query(ground_truth: dict[str, Any], where: str) -> Query:
    try:
        q = Query.model_validate(ground_truth["query"])
    except (KeyError, ValueError) as exc:
        raise GoldUnavailable(f"{where}: query: {exc}") from None
    if not q.answers:
        raise GoldUnavailable(f"{where}: query {q.id!r}.answers: no ground-truth station")
    return q


def findable(a: AnswerStation, world: World) -> bool:
    """Whether the tools can show this answer as suitable: its station in the world's table, and (when the data names
    the place that makes it valid) that place among the station's POIs."""
    s = world.station(a.station_id)
    return s is not None and _suitable({p.name for p in world.pois_near(s.lat, s.lon)}, a)


def gold(ground_truth: dict[str, Any], world: World, where: str, station_file: str, budget: int) -> Player:
    """Upstream answers the tools cannot show (a station missing from the station table, which the importer adds
    without POIs, or a place its POI list lacks) are the data's: left out, and an episode left with none is
    ``GoldUnavailable``. Generated answers are all played: one the tools do not show is a shortfall of rig's own.
    ``budget`` is the step budget (max_steps): its last step answers with what has been found by then."""
    q = _query(ground_truth, where)
    targets = q.answers[:MAX_ANSWER]
    if q.source == "upstream":
        targets = [a for a in q.answers if findable(a, world)][:MAX_ANSWER]
        if not targets:
            ids = ", ".join(a.station_id for a in q.answers[:5])
            raise GoldUnavailable(
                f"{where}.Answer: no answer station ({ids}) is in {station_file} with its Station_poi_name among "
                "its POIs, so no agent can find one"
            )
    search_m = world.setting.search_radius_m
    return lambda request: _next(q, targets, search_m, budget, request)


def anti_gold(ground_truth: dict[str, Any], index: StationIndex, where: str) -> Player:
    q = _query(ground_truth, where)
    wrong = [s.station_id for s in index.stations if match(s.station_id, q.answers, index) is None]
    answer = wrong[:MAX_ANSWER] or ["no-such-station"]

    def play(request: ChatRequest) -> Action:
        if not history(request):
            lat, lon = user_coordinate(request, q)
            return Call(SEARCH_STATIONS, {"coord": [lon, lat]})
        return Call(FINAL, {"stations": answer})

    return play


def metrics() -> dict[str, MetricRole]:
    """Hits@K are the scores; a correct agent makes no argument, area or format error."""
    scores: dict[str, MetricRole] = {"hits@1": "score", "hits@2": "score", "hits@3": "score"}
    return {**scores, "argument_errors": "lower", "out_of_area": "lower", "format_errors": "lower"}
