"""Paper mode: the definitions of the paper (sec. 3.2), made concrete where the paper leaves room (README lists each
choice). Every episode counts in every metric; an agent that produced nothing for a metric scores 0 there."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from rig.benchmarks.mobilitybench.lexicon import LEXICONS, SCENARIOS
from rig.benchmarks.mobilitybench.scoring.records import (
    ANSWER_THRESHOLD,
    ID_THRESHOLD,
    Call,
    ConstraintItem,
    Prediction,
    Truth,
    call_args,
    gt_calls,
)
from rig.benchmarks.mobilitybench.scoring.text import (
    coords_in,
    haversine_km,
    norm,
    stated_clocks_min,
    stated_distances_m,
    stated_durations_s,
    stated_traffic,
)
from rig.benchmarks.mobilitybench.similarity import Backend, sim
from rig.benchmarks.mobilitybench.tools import GT_ALIASES, ROUTE_TOOLS, parse_lonlat

DISTANCE_TOLERANCE = 0.05  # the reference configuration's distance_tolerance, unused there, used in paper mode
ROUTE_MATCH_M = 150.0  # paper FPR: a route call's endpoints within this of the ground truth's
CLOCK_TOLERANCE_MIN = 3

ZH_SCENARIO_ALIASES = {s: (lab,) for s, lab in LEXICONS["zh"].intent_labels.items()}


def paper_intent(intent: str | None, scenario: str, backend: Backend) -> float:
    """ID: the predicted label against the scenario label. A prediction that names a taxonomy label is judged by
    that label alone (so a close but different category is wrong); other text by similarity >= 0.7."""
    if not intent or not intent.strip():
        return 0.0
    p = norm(intent)
    names = {s: {norm(s), *(norm(a) for a in ZH_SCENARIO_ALIASES.get(s, ()))} for s in SCENARIOS}
    named = {s for s, ns in names.items() if p in ns}
    if named:
        return 1.0 if scenario in named else 0.0
    aliases = ZH_SCENARIO_ALIASES.get(scenario, ())
    best = max([sim(intent, scenario, backend), *(sim(intent, a, backend) for a in aliases)])
    return 1.0 if best >= ID_THRESHOLD else 0.0


_MODE_WORDS = {
    "walk": ("walk", "walking", "on foot", "foot", "步行"),
    "bike": ("bike", "bicycle", "cycling", "cycle", "骑行"),
    "drive": ("drive", "driving", "car", "驾车", "开车"),
    "transit": ("transit", "public transport", "bus", "tram", "metro", "subway", "train", "公交", "地铁"),
}
_SLOT_ALIASES = {
    "from": "origin",
    "start": "origin",
    "to": "destination",
    "end": "destination",
    "via": "waypoints",
    "waypoint": "waypoints",
    "stops": "waypoints",
    "preference": "preferences",
    "travel_mode": "mode",
    "anchor": "near",
    "category": "category",
    "keyword": "category",
    "arrive_by": "time",
    "depart_at": "time",
    "date": "time",
}


def _canon_value(slot: str, value: Any) -> str:
    v = norm(value)
    if slot == "mode":
        for mode, words in _MODE_WORDS.items():
            if v in {norm(w) for w in words}:
                return mode
    if slot == "preferences":
        return v.replace(" ", "_")
    if slot == "time":
        m = re.fullmatch(r"(\d{1,2}) ?(\d{2})", v)
        if m:
            return f"{int(m.group(1)):02d}:{m.group(2)}"
    return v


def constraint_items(pred: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """A predicted constraint object as (slot, value) pairs; lists give one pair per element."""
    out: list[tuple[str, str]] = []
    for k, v in (pred or {}).items():
        slot = _SLOT_ALIASES.get(norm(k).replace(" ", "_"), norm(k).replace(" ", "_"))
        vals = v if isinstance(v, list) else [v]
        for x in vals:
            if x is None or (isinstance(x, str) and not x.strip()):
                continue
            out.append((slot, _canon_value(slot, x)))
    return sorted(set(out))


def paper_extraction(pred: Mapping[str, Any] | None, gold: list[ConstraintItem] | None) -> float | None:
    """IE: 1 when the predicted constraint set equals the GT set (each GT item matched by one of its spellings,
    nothing extra). None when the episode has no GT constraint set."""
    if gold is None:
        return None
    items = constraint_items(pred)
    remaining = list(items)
    for g in gold:
        accepted = {_canon_value(g.slot, v) for v in g.values}
        hit = next((it for it in remaining if it[0] == g.slot and it[1] in accepted), None)
        if hit is None:
            return 0.0
        remaining.remove(hit)
    return 1.0 if not remaining else 0.0


# Atomic actions of the paper's decomposition, per scenario (the reference's gold steps, in English).
GOLD_ACTIONS: dict[str, tuple[str, ...]] = {
    "POI Query": ("locate",),
    "Geolocation Query": ("locate",),
    "Nearby Query": ("locate", "nearby"),
    "Weather Query": ("weather",),
    "Traffic Info Query": ("locate", "traffic"),
    "Route Property Query": ("locate", "route"),
    "Arrival/Departure Time Query": ("locate", "route", "time"),
    "Point-to-Point Planning": ("locate", "route"),
    "Multi-stop Planning": ("locate", "multi_stop_route"),
    "Option-Constrained Route Planning": ("locate", "preference_route"),
    "Route-Constrained Planning": ("locate", "route"),
}
_ACTION_RX = {
    "locate": r"locat|coordinat|geocod|address|where (?:is|am)|position|look up|find (?:the )?(?:place|poi)|"
    r"search (?:for )?(?:the )?(?:place|poi)|query_poi|reverse_geocoding|"
    r"坐标|定位|位置|经纬度|地址|查询.*?(?:在哪|：)",
    "nearby": r"nearby|near |around|close to|search_around|周边|附近|周围",
    "weather": r"weather|forecast|temperature|天气|气温|预报",
    "traffic": r"traffic|congestion|jam|road condition|路况|拥堵",
    "route": r"route|routing|directions|navigat|path|how to get|itinerary|路线|规划|导航|怎么走|路径",
    "time": r"depart|leave|arriv|subtract|back-?calculat|latest time|出发时间|倒推|推算|几点",
    "multi_stop": r"waypoint|via |stop at|stops|through|途径|途经|经过|经停",
    "preference": r"avoid|prefer|no highway|toll|fastest|shortest|highway|motorway|不走高速|避开|偏好|高速|少收费",
}
_ACTION_C = {k: re.compile(v, re.IGNORECASE) for k, v in _ACTION_RX.items()}


def step_actions(text: str) -> set[str]:
    """Atomic actions one plan step performs (f_DEC's classifier)."""
    found = {k for k, rx in _ACTION_C.items() if rx.search(text or "")}
    if "route" in found:
        if "multi_stop" in found:
            found.add("multi_stop_route")
        if "preference" in found:
            found.add("preference_route")
    return found - {"multi_stop", "preference"}


def tool_actions(name: str, arguments: Any) -> set[str]:
    """Atomic actions a tool call performs (for agents whose steps are their tool calls)."""
    name = GT_ALIASES.get(name, name)
    a = call_args(arguments)
    if name in ("query_poi", "reverse_geocoding"):
        return {"locate"}
    if name == "search_around_poi":
        return {"nearby"}
    if name == "weather_query":
        return {"weather"}
    if name == "traffic_status":
        return {"traffic"}
    if name in ROUTE_TOOLS:
        out = {"route"}
        if a.get("waypoints"):
            out.add("multi_stop_route")
        if a.get("strategy") and name == "driving_route":
            out.add("preference_route")
        return out
    return set()


def _matches(action: str, gold: str) -> bool:
    if gold == "route":
        return action in ("route", "multi_stop_route", "preference_route")
    return action == gold


def paper_decomposition(
    steps: list[str] | None, scenario: str, actions: list[set[str]] | None = None
) -> tuple[float | None, float | None]:
    """(DEC_P, DEC_R) with the paper's formulas: P = |V_gold matched by some step| / |V_gold|,
    R = |steps matching some gold action| / |V_pred|. A step's actions come from its text and, when given, from
    the tool it called (a step without text has only that). No steps: (0, 0). Unknown scenario: (None, None)."""
    gold = GOLD_ACTIONS.get(scenario)
    if not gold:
        return None, None
    steps, actions = steps or [], actions or []
    per_step = [
        step_actions(steps[i] if i < len(steps) else "") | (actions[i] if i < len(actions) else set())
        for i in range(max(len(steps), len(actions)))
    ]
    if not per_step:
        return 0.0, 0.0
    covered = sum(1 for g in gold if any(_matches(a, g) for acts in per_step for a in acts))
    matched = sum(1 for acts in per_step if any(_matches(a, g) for a in acts for g in gold))
    return covered / len(gold), matched / len(per_step)


def paper_tools(calls: list[Call], truth: Truth, validator: Callable[[str, Any], bool]) -> tuple[float | None, ...]:
    """(TS_P, TS_R, SC) by the paper, over call instances (the GT program is a minimal call sequence):
    TS_P = |T_gold ∩ T_pred| / |T_gold| (multiset), TS_R = 1 - |T_pred \\ T_gold| / |T_pred|,
    SC = mean over the agent's calls of f_SC (mandatory arguments present, values valid). Each call counts once.
    No calls: TS_P 0, TS_R 0, SC 0. Empty GT program: None."""
    gt = Counter(n for n, _ in gt_calls(truth))
    if not gt:
        return None, None, None
    if not calls:
        return 0.0, 0.0, 0.0
    pred = Counter(GT_ALIASES.get(c.name, c.name) for c in calls)
    inter = sum(min(c, gt[n]) for n, c in pred.items())
    extra = sum(max(0, c - gt[n]) for n, c in pred.items())
    total = sum(pred.values())
    sc = sum(1.0 if (c.valid if c.valid is not None else validator(c.name, c.arguments)) else 0.0 for c in calls) / len(
        calls
    )
    return inter / sum(gt.values()), 1 - extra / total, sc


def paper_delivery(pred: Prediction) -> float:
    """DR: the agent ended with its final answer (no interruption), the answer is not empty, it rests on at least
    one successful tool call, and no tool failure was left unrecovered (every failed call is followed by a
    successful call of the same tool)."""
    if not pred.delivered or not (pred.content or "").strip():
        return 0.0
    if not any(c.ok for c in pred.calls):
        return 0.0
    for i, c in enumerate(pred.calls):
        if c.ok is False and not any(d.ok and d.name == c.name for d in pred.calls[i + 1 :]):
            return 0.0
    return 1.0


def _route_call_matches(call: Call, want: Mapping[str, Any]) -> bool:
    if GT_ALIASES.get(call.name, call.name) != want.get("tool") or not call.ok:
        return False
    a = call_args(call.arguments)
    for key in ("origin", "destination"):
        p, q = parse_lonlat(a.get(key)), parse_lonlat(want.get(key))
        if p is None or q is None or haversine_km(*p, *q) * 1000 > ROUTE_MATCH_M:
            return False
    wp_want = [parse_lonlat(w) for w in want.get("waypoints") or []]
    wp_got = [parse_lonlat(w) for w in a.get("waypoints") or []]
    if len(wp_want) != len(wp_got) or any(
        p is None or q is None or haversine_km(*p, *q) * 1000 > ROUTE_MATCH_M
        for p, q in zip(wp_got, wp_want, strict=True)
    ):
        return False
    return sorted(want.get("strategy") or []) == sorted(a.get("strategy") or [])


def paper_final_pass(pred: Prediction, truth: Truth, backend: Backend, delivered: float) -> float | None:
    """FPR: 1 when the delivered answer satisfies every check of the episode (see Checks). None without checks."""
    ch = truth.checks
    if ch is None:
        return None
    if not delivered:
        return 0.0
    text = pred.content or ""
    if ch.route is not None and not any(_route_call_matches(c, ch.route) for c in pred.calls):
        return 0.0
    if ch.route_index is not None:
        if pred.route_index != ch.route_index:
            return 0.0
    elif pred.route_index == -1:
        return 0.0  # the answer declares the trip impossible
    if ch.distance_m is not None or ch.duration_s is not None:
        ok = False
        if ch.distance_m is not None:
            ok = any(abs(d - ch.distance_m) <= DISTANCE_TOLERANCE * ch.distance_m for d in stated_distances_m(text))
        if not ok and ch.duration_s is not None:
            tol = max(60.0, DISTANCE_TOLERANCE * ch.duration_s)
            ok = any(abs(d - ch.duration_s) <= tol for d in stated_durations_s(text))
        if not ok:
            return 0.0
    if ch.clock is not None:
        h, m = (int(x) for x in ch.clock.split(":"))
        want = h * 60 + m
        if not any(min(abs(c - want), 1440 - abs(c - want)) <= CLOCK_TOLERANCE_MIN for c in stated_clocks_min(text)):
            return 0.0
    nt = norm(text)
    for group in ch.facts:
        if not any(norm(f) in nt for f in group):
            return 0.0
    if ch.places or ch.coord:
        named = any(norm(p) in nt for p in ch.places)
        near = False
        if ch.coord:
            lex = LEXICONS["en"]
            near = any(
                haversine_km(lat, lon, ch.coord["lat"], ch.coord["lon"]) * 1000 <= ch.coord.get("max_m", 250)
                for lon, lat in coords_in(text, lex)
            )
        if not (named or near):
            return 0.0
    if ch.similar is not None and not (ch.similar in text or sim(text, ch.similar, backend) > ANSWER_THRESHOLD):
        return 0.0
    if ch.traffic is not None and ch.traffic not in stated_traffic(text):
        return 0.0  # the answer does not state the road status the data gives
    return 1.0
