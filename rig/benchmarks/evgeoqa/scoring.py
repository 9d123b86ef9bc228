"""Hits@K against the ground-truth stations, and the cause of a failed episode (paper sec. 5.2, 5.5, A.4).

Matching rule (README "Matching"): a predicted string names a station when
1. it equals a known station id (case and surrounding whitespace ignored), or
2. it contains exactly one known station id as a token ("Charging station n1685871599"), or
3. it equals the name of exactly one station (full/half-width brackets and whitespace unified; a name that several
   stations share names none of them).
It is a hit when that station is a ground-truth station, or lies within 50 m of one (the same site: co-located
phases of one station are interchangeable, which avoids the upstream data's arbitrary tie cut at rank 5).
Hits@K = 1 when any of the first K predictions is a hit (sec. 5.2: "matches any station within the ground truth
set"); an empty or unparseable answer scores 0 at every K.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from rig.benchmarks.evgeoqa.data import SAME_SITE_M, AnswerStation, Station
from rig.maps.geo import geodesic_m

KS = (1, 2, 3)
CAUSES = (
    "format_error",
    "max_tool_calls",
    "hallucinated_station",
    "factual_conflation",
    "argument_error",
    "insufficient_exploration",
)
ARGUMENT_ERRORS = ("invalid_arguments", "unknown_tool", "out_of_area")

_BRACKETS = str.maketrans({"（": "(", "）": ")", "【": "[", "】": "]", "［": "[", "］": "]"})
_TOKEN = re.compile(r"[^\s,;:()\[\]{}\"'<>]+")


def norm(text: str) -> str:
    t = unicodedata.normalize("NFKC", str(text)).translate(_BRACKETS).casefold()
    return " ".join(t.split())


class StationIndex:
    """Every station of a world, to resolve what the model wrote into a station."""

    def __init__(self, stations: Iterable[Station]) -> None:
        self.stations = list(stations)
        self.by_id: dict[str, Station] = {}
        names: dict[str, list[Station]] = {}
        for s in self.stations:
            self.by_id.setdefault(norm(s.station_id), s)
            names.setdefault(norm(s.name), []).append(s)
        self.by_name = {n: v[0] for n, v in names.items() if len({x.station_id for x in v}) == 1}

    def resolve(self, text: str) -> Station | None:
        t = norm(text)
        if not t:
            return None
        if t in self.by_id:
            return self.by_id[t]
        found = {tok for tok in _TOKEN.findall(t) if tok in self.by_id}
        if len(found) == 1:
            return self.by_id[found.pop()]
        return self.by_name.get(t)


def match(pred: str, answers: Sequence[AnswerStation], index: StationIndex) -> int | None:
    """The rank of the ground-truth station that ``pred`` names (or shares a site with), else None."""
    s = index.resolve(pred)
    if s is None:
        return None
    for i, a in enumerate(answers):
        if norm(a.station_id) == norm(s.station_id):
            return i
    for i, a in enumerate(answers):
        if geodesic_m(s.lat, s.lon, a.lat, a.lon) <= SAME_SITE_M:
            return i
    return None


def hits(
    preds: Sequence[str] | None, answers: Sequence[AnswerStation], index: StationIndex, ks: Sequence[int] = KS
) -> dict[str, float]:
    preds = list(preds or [])
    matched = [match(p, answers, index) is not None for p in preds]
    return {f"hits@{k}": float(any(matched[:k])) for k in ks}


def classify(
    *,
    stop: str,
    hit: bool,
    preds: Sequence[str] | None,
    index: StationIndex,
    answers: Sequence[AnswerStation],
    seen_stations: Iterable[str],
    seen_poi_keys: Iterable[str],
    argument_errors: int,
) -> str | None:
    """Why an episode failed (None when it has a hit). First applicable cause wins:
    format_error (re-prompt budget spent), max_tool_calls (step budget spent; the paper's "Max Tool Call"),
    hallucinated_station (an answer names a station no Search_Stations call returned), factual_conflation (the
    evidence for a ground-truth station was retrieved, yet the answer is wrong), argument_error (tool calls with
    malformed arguments or out-of-area points), insufficient_exploration (answered before finding a valid station)."""
    if hit:
        return None
    if stop == "format_errors":
        return "format_error"
    if stop == "max_steps":
        return "max_tool_calls"
    seen = {norm(s) for s in seen_stations}
    for p in preds or []:
        s = index.resolve(p)
        if s is None or norm(s.station_id) not in seen:
            return "hallucinated_station"
    poi_seen = set(seen_poi_keys)
    for a in answers:
        if norm(a.station_id) in seen and poi_seen & set(a.poi_keys):
            return "factual_conflation"
    if argument_errors:
        return "argument_error"
    return "insufficient_exploration"
