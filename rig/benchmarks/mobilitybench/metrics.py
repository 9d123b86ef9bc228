"""MobilityBench's eleven metrics, in two modes.

``paper``: the definitions of the paper (sec. 3.2), made concrete where the paper leaves room (README lists each
choice): every episode counts in every metric; an agent that produced nothing for a metric scores 0 there.
``reference``: what the public evaluator computes (reference notes A3): cumulative tool-call capture for
Plan-and-Execute, cases missing from a metric's table dropped (None here), TS-P/TS-R as type-level recall and
instance-level non-redundancy with its rounding, FPR for route scenarios as "produced a route index", Chinese
keyword rules (or their English translation on English data).

Per-episode values are floats, or None where a metric does not apply (never 0 as a stand-in); tables average the
non-None values. IT/OT are token counts.
"""

from __future__ import annotations

import ast
import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from rig.benchmarks.mobilitybench.lexicon import (EVAL_TYPE, LEXICONS, REF_SLOTS, REF_UNREACHABLE_SLOTS, SCENARIOS,
                                                  Lexicon, lookup_scenario)
from rig.benchmarks.mobilitybench.similarity import Backend, CharJaccard, sim
from rig.benchmarks.mobilitybench.tools import GT_ALIASES, ROUTE_TOOLS, parse_lonlat, schema_valid

METRICS: tuple[str, ...] = ("ID", "IE", "DEC_P", "DEC_R", "TS_P", "TS_R", "SC", "DR", "FPR", "IT", "OT")
MODES = ("paper", "reference")
ID_THRESHOLD = 0.7  # similarity_threshold of the reference configuration (inclusive)
ANSWER_THRESHOLD = 0.8  # answer similarity threshold (strict)
DISTANCE_TOLERANCE = 0.05  # the reference configuration's distance_tolerance, unused there, used in paper mode
ROUTE_MATCH_M = 150.0  # paper FPR: a route call's endpoints within this of the ground truth's
CLOCK_TOLERANCE_MIN = 3
REF_COORD_KM = 1.0

# Reference tool-argument checks (configs/evaluation/default.yaml).
CHECK_MIN: dict[str, tuple[str, ...]] = {
    "query_poi": ("keywords",), "driving_route": ("origin", "destination"), "walking_route": ("origin", "destination"),
    "bicycling_route": ("origin", "destination"), "bus_route": ("origin", "destination"), "weather_query": ("city",),
    "reverse_geocoding": ("longitude", "latitude"), "search_around_poi": ("location", "keywords"),
    "traffic_status": ("name", "city"),
}
CHECK_MAX: dict[str, tuple[str, ...]] = {
    "query_poi": ("keywords", "city"), "driving_route": ("origin", "destination", "waypoints", "strategy"),
    "walking_route": ("origin", "destination"), "bicycling_route": ("origin", "destination"),
    "bus_route": ("origin", "destination", "strategy"), "weather_query": ("city", "need_forecast"),
    "reverse_geocoding": ("longitude", "latitude", "radius"), "search_around_poi": ("location", "keywords", "radius"),
    "traffic_status": ("name", "city"),
}


# -- records ----------------------------------------------------------------------------------------------------

class Call(BaseModel):
    """One tool call as the metrics see it."""

    name: str
    arguments: Any = Field(default_factory=dict)  # dict, or JSON text as some models write it
    ok: bool | None = None  # the sandbox answered successfully
    valid: bool | None = None  # passed schema validation (None: not recorded; the metric validates itself)
    task: int = 0  # Plan-and-Execute: index of the plan step whose worker made it (cumulative capture)


class Prediction(BaseModel):
    """What an agent produced for one episode, in the shape both modes read."""

    intent: str | None = None  # None: no intent output at all (planner failed / no final answer)
    constraints: dict[str, Any] | None = None
    thinking: str = ""
    steps: list[str] | None = None  # plan tasks (P&E) or step descriptions (ReAct); None: no plan
    step_actions: list[set[str]] | None = None  # per step, atomic actions known from the tool it called (ReAct)
    calls: list[Call] = Field(default_factory=list)
    content: str | None = None  # the final answer text; None: no final answer
    route_index: int | None = None
    report: str | None = None  # the reporter text the reference evaluator reads (```json fence)
    delivered: bool = False  # the agent ended through its final answer, within budget
    errored: bool = False  # the run raised (engine error): reference mode drops it everywhere but efficiency
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: dict[str, Any] | None = None  # reference stage usage keys, when scoring upstream raw results


class ConstraintItem(BaseModel):
    slot: str
    values: list[str]  # accepted spellings of one value


class Checks(BaseModel):
    """What a correct final answer must satisfy (paper-mode FPR). Every present group must pass."""

    route: dict[str, Any] | None = None  # {tool, origin, destination, waypoints?, strategy?}: a matching call
    route_index: int | None = None  # the plan the answer must choose (route-constrained)
    distance_m: float | None = None  # the answer must state this distance (5 %) ...
    duration_s: float | None = None  # ... or this duration (5 %, at least 1 minute); either one passes
    clock: str | None = None  # "HH:MM" the answer must state (within 3 minutes)
    facts: list[list[str]] = Field(default_factory=list)  # every group: one of its spellings in the answer
    places: list[str] = Field(default_factory=list)  # at least one named in the answer ...
    coord: dict[str, float] | None = None  # ... or a coordinate within max_m of {lat, lon}
    similar: str | None = None  # the answer contains it or is similar (> 0.8) to it


class Truth(BaseModel):
    scenario: str
    family: str = ""
    tool_list: list[dict[str, Any]] = Field(default_factory=list)
    slots: dict[str, Any] = Field(default_factory=dict)  # reference GT columns (IE slots, answer rules)
    constraints: list[ConstraintItem] | None = None  # paper IE
    checks: Checks | None = None  # paper FPR
    lang: str = "en"


# -- shared helpers -----------------------------------------------------------------------------------------

def gt_calls(truth: Truth) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for c in truth.tool_list:
        name = GT_ALIASES.get(str(c.get("name", "")), str(c.get("name", "")))
        args = c.get("arguments") or {}
        out.append((name, args if isinstance(args, dict) else {}))
    return out


def _args(a: Any) -> dict[str, Any]:
    if isinstance(a, dict):
        return a
    if isinstance(a, str):
        try:
            v = json.loads(a)
            return v if isinstance(v, dict) else {}
        except json.JSONDecodeError:
            return {}
    return {}


def norm(text: Any) -> str:
    t = unicodedata.normalize("NFKC", str(text)).casefold()
    t = re.sub(r"[\s\-_/,.;:!?'\"()\[\]{}]+", " ", t).strip()
    return re.sub(r"^(the|a|an) ", "", t)


def _has(text: str, word: str) -> bool:
    return word.lower() in text.lower()


def _count(text: str, words: Iterable[str]) -> int:
    return sum(1 for w in words if _has(text, w))


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(h)))


_COORD_RX = re.compile(r"(\d{2,3}\.\d+),\s*(\d{1,2}\.\d+)")


def coords_in(text: str, lex: Lexicon) -> list[tuple[float, float]]:
    """(lon, lat) pairs written as "lon,lat" in text, inside the lexicon's plausible range."""
    out = []
    for a, b in _COORD_RX.findall(text or ""):
        lon, lat = float(a), float(b)
        if lex.lon_range[0] <= lon <= lex.lon_range[1] and lex.lat_range[0] <= lat <= lex.lat_range[1]:
            out.append((lon, lat))
    return out


# -- reference mode -----------------------------------------------------------------------------------------

def ref_intent(intent: str | None, scenario: str, backend: Backend, lex: Lexicon) -> float | None:
    """ID: 1 when sim(intent, the scenario's label) >= 0.7. None when there is no planner output."""
    if intent is None:
        return None
    label = lookup_scenario(lex.intent_labels, scenario) or "Unknown intent"
    b = CharJaccard(lower=True) if isinstance(backend, CharJaccard) else backend  # the ID copy lower-cases
    return 1.0 if sim(intent, label, b) >= ID_THRESHOLD else 0.0


def ref_extraction(thinking: str, steps: list[str] | None, scenario: str, slots: Mapping[str, Any]) -> float | None:
    """IE: every truthy GT slot of the scenario appears verbatim in thinking + steps; 1 when none is checkable."""
    if steps is None and not thinking:
        return None
    text = (thinking or "") + " " + "; ".join(steps or [])
    for slot in lookup_scenario(REF_SLOTS, scenario) or ():
        if slot in REF_UNREACHABLE_SLOTS:
            continue
        value = slots.get(slot)
        if value and str(value) not in text:
            return 0.0
    return 1.0


def ref_decomposition(steps: list[str] | None, scenario: str, lex: Lexicon) -> tuple[float | None, float | None]:
    """(DEC_P, DEC_R) as the code computes them: P = hits/|pred|, R = hits/|gold|, atomic steps found by regex
    anywhere in the flattened plan. (None, None) without a plan or for an unknown scenario."""
    gold = lookup_scenario(lex.gold_steps, scenario)
    if steps is None or not gold:
        return None, None
    pred = set(lex.steps_in("; ".join(steps)))
    hits = len(pred & set(gold))
    return round(hits / len(pred), 4) if pred else 0.0, round(hits / len(set(gold)), 4)


def ref_tools(calls: list[tuple[str, Any]], truth: Truth) -> tuple[float | None, float | None, float | None]:
    """(TS_P, TS_R, SC) as the code computes them. None when the GT program is empty or nothing was called."""
    gt = gt_calls(truth)
    if not gt or not calls:
        return None, None, None
    pred = [(GT_ALIASES.get(n, n), _args(a)) for n, a in calls]
    gt_names, pred_names = Counter(n for n, _ in gt), Counter(n for n, _ in pred)
    ts_p = len(set(gt_names) & set(pred_names)) / len(set(gt_names))
    useful = sum(min(c, gt_names.get(n, 0)) for n, c in pred_names.items())
    ts_r = 1 - round((len(pred) - useful) / len(pred), 4)
    used: Counter[str] = Counter()
    scores = []
    for name, args in pred:
        if used[name] >= gt_names.get(name, 0):
            continue  # unpaired: not scored
        used[name] += 1
        need = CHECK_MIN.get(name, ())
        c = sum(1 for k in need if k in args) / len(need) if need else 1.0
        f = 0.0 if any(k not in CHECK_MAX.get(name, ()) for k in args) else 1.0
        scores.append(c * f)  # schema_valid is always 1 in the reference pipeline
    sc = sum(scores) / len(scores) if scores else 0.0
    return ts_p, ts_r, sc


def cumulative_capture(calls: list[Call]) -> list[tuple[str, Any]]:
    """The reference's tool table for a Plan-and-Execute run: each worker record lists every call in its history,
    i.e. all calls of earlier plan steps plus its own, so step i of n is counted n - i + 1 times."""
    tasks = sorted({c.task for c in calls})
    rows: list[tuple[str, Any]] = []
    for t in tasks:
        rows += [(c.name, c.arguments) for c in calls if c.task < t]
        rows += [(c.name, c.arguments) for c in calls if c.task == t]
    return rows


_FENCE = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _fenced(answer: str) -> dict[str, Any] | None:
    m = _FENCE.search(answer or "")
    if not m:
        return None
    try:
        v = json.loads(m.group(1))
    except json.JSONDecodeError:
        return None
    return v if isinstance(v, dict) else None


def ref_content(answer: str) -> str:
    block = _fenced(answer)
    if block is not None and str(block.get("content") or "").strip():
        return str(block["content"])
    return answer or ""


def ref_route_index(answer: str, lex: Lexicon) -> str | None:
    block = _fenced(answer)
    if block is not None and "route_index" in block:
        v = block["route_index"]
        return "" if v is None else str(v)
    m = re.search(r'route_index["\s:]+(\d+)', answer or "")
    if m:
        return m.group(1)
    m = re.search(lex.scheme, answer or "", re.IGNORECASE)
    if m:
        return str(int(m.group(1)) - 1)
    return None


def sanitize_literal(text: str) -> str:
    return text.replace("<ToolStatus.SUCCESS: 0>", "'SUCCESS'").replace("<ToolStatus.FAILED: 1>", "'FAILED'")


def repair_literal(text: Any) -> Any:
    """Parse a Python-literal cell, repairing one cut at the spreadsheet cell limit: drop trailing separators,
    close an open quote, close open brackets in stack order. None when nothing parses."""
    if not isinstance(text, str):
        return text
    s = sanitize_literal(text)
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    end = len(s)
    while end > 0:
        cand = s[:end].rstrip().rstrip(",:+-").rstrip()
        stack, quote, esc = [], None, False
        for ch in cand:
            if quote:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
            elif ch in "([{":
                stack.append(ch)
            elif ch in ")]}" and stack:
                stack.pop()
        closed = cand + (quote or "") + "".join({"(": ")", "[": "]", "{": "}"}[c] for c in reversed(stack))
        try:
            return ast.literal_eval(closed)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            # Step back to the previous separator rather than one character at a time.
            cut = max(cand.rfind(","), cand.rfind(":"), cand.rfind("{"), cand.rfind("["))
            end = cut if 0 < cut < end else end - 1
    return None


def _admin(text: str) -> tuple[str, str]:
    """Municipality and district of a Chinese address (a stand-in for the reference's cpca parser)."""
    city = re.search(r"[^省市\s]{1,10}市", text or "")
    district = re.search(r"[^市区县\s]{1,10}[区县]", text or "")
    return (city.group(0) if city else ""), (district.group(0) if district else "")


def _dig(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def ref_answer(answer: str, truth: Truth, backend: Backend, lex: Lexicon) -> tuple[float, float]:
    """(DR, FPR) of the reference answer metric on the reporter text. Raises ValueError where the reference does
    (route-constrained with no GT index): the caller drops the case."""
    content = ref_content(answer)
    etype = lookup_scenario(EVAL_TYPE, truth.scenario) or "general"
    idx = ref_route_index(answer, lex)
    g = truth.slots
    if not content.strip() or content.strip() == "nan":
        return 0.0, 0.0
    # Delivery
    if etype in ("route", "route_custom", "route_info"):
        dr = idx not in (None, "") or _count(content, lex.route_kw) >= 2
    elif etype in ("poi", "location"):
        dr = bool(_COORD_RX.search(content)) or _count(content, lex.address_kw) >= 2
    elif etype == "nearby":
        dr = _count(content, lex.nearby_kw) >= 1 or len(content) > 20
    elif etype == "weather":
        dr = _count(content, lex.weather_kw) >= 1
    elif etype == "traffic":
        dr = _count(content, lex.traffic_kw) >= 1
    else:
        dr = not re.search(lex.failure, content, re.IGNORECASE) and len(content) > 10
    if not dr:
        return 0.0, 0.0
    return 1.0, _ref_pass(etype, content, idx, g, backend, lex)


def _ref_pass(etype: str, content: str, idx: str | None, g: Mapping[str, Any], backend: Backend,
              lex: Lexicon) -> float:
    if etype == "route":
        return 1.0 if idx and idx != "-1" else 0.0
    if etype == "route_custom":
        ans = int(float(g.get("matched_transit_index", "")))  # "" raises, as in the reference
        if idx in ("", "-1") and ans == 0:
            return 1.0
        return 1.0 if idx and int(idx) == ans else 0.0
    if etype == "route_info":
        return 1.0 if _count(content, lex.route_kw + lex.route_info_extra) >= 2 else 0.0
    if etype == "weather":
        return _ref_weather(content, g, backend)
    if etype == "poi":
        return _ref_poi(content, g, lex)
    if etype == "location":
        gt = str(g.get("formatted_address") or "")
        if gt:
            (c1, d1), (c2, d2) = _admin(gt), _admin(content)
            if lex.lang == "zh" and c1 and d1 and c1 == c2 and d1 == d2:
                return 1.0
            if gt in content or sim(content, gt, backend) > ANSWER_THRESHOLD:
                return 1.0
        return 0.0
    if etype == "nearby":
        gt = g.get("near_poi_ans")
        gt = repair_literal(gt) if isinstance(gt, str) else gt
        pois = _dig(gt, "data", "pois")
        if pois is None and isinstance(_dig(gt, "data"), list):
            pois = _dig(gt, "data")
        if not pois:
            return 1.0
        for p in pois[:5]:
            name = str(p.get("name", "")) if isinstance(p, dict) else ""
            if name and (name in content or sim(content, name, backend) > ANSWER_THRESHOLD):
                return 1.0
        return 1.0 if sim(content, str(gt), backend) > ANSWER_THRESHOLD else 0.0
    if etype == "traffic":
        desc = str(_dig(g.get("ans"), "trafficinfo", "description") or "")
        if desc:
            present = [k for k in lex.traffic_judge_kw if _has(desc, k)]
            if len(present) >= 2:
                return 1.0 if _count(content, present) >= 2 else 0.0
            return 1.0 if desc in content or sim(content, desc, backend) > ANSWER_THRESHOLD else 0.0
        n = _count(content, lex.traffic_judge_kw)
        return 1.0 if n >= 2 else 0.5 if n == 1 else 0.0
    # general
    if g.get("route_ans"):
        return 1.0 if idx and idx != "-1" else 0.0
    if g.get("weather_description"):
        return _ref_weather(content, g, backend)
    if g.get("poi_result"):
        return _ref_poi(content, g, lex)
    return 0.0


def _ref_weather(content: str, g: Mapping[str, Any], backend: Backend) -> float:
    gt = str(g.get("weather_description") or "")
    if not gt or gt == "nan":
        return 0.0
    return 1.0 if gt in content or sim(content, gt, backend) > ANSWER_THRESHOLD else 0.0


def _ref_poi(content: str, g: Mapping[str, Any], lex: Lexicon) -> float:
    target: tuple[float, float] | None = None
    ans_loc = g.get("ans_loc")
    p = parse_lonlat(ans_loc) if isinstance(ans_loc, str) else None  # the loader's tuple does not parse
    if p is not None:
        target = (p[1], p[0])
    else:
        res = g.get("poi_result")
        res = repair_literal(res) if isinstance(res, str) else res
        if isinstance(res, dict):
            loc = _dig(res, "data", "location") or res.get("location")
            name = res.get("name") or _dig(res, "data", "name")
            if name and str(name) in content:
                return 1.0
            q = parse_lonlat(loc) if isinstance(loc, str) else None
            target = (q[1], q[0]) if q else None
    if target is None:
        return 0.0
    for lon, lat in coords_in(content, lex):
        if haversine_km(lat, lon, target[1], target[0]) <= REF_COORD_KM:
            return 1.0
    return 0.0


_STAGES = ("Planner", "Worker", "Reporter")


def ref_efficiency(usage: Mapping[str, Any] | None) -> tuple[int, int]:
    """(IT, OT) from the reference's per-stage usage keys; a stage with only a total is split 70/30."""
    it = ot = 0
    for st in _STAGES:
        lows = {str(k).lower().replace(" ", "_"): v for k, v in (usage or {}).items()}
        base = st.lower()
        p = next((lows[k] for k in (f"{base}_prompt_tokens", f"{base}_input_tokens") if k in lows), None)
        c = next((lows[k] for k in (f"{base}_completion_tokens", f"{base}_output_tokens") if k in lows), None)
        if p is None and c is None:
            total = lows.get(f"{base}_total_tokens")
            if total is not None:
                share = int(0.7 * int(total))
                it, ot = it + share, ot + int(total) - share
            continue
        it += int(p or 0)
        ot += int(c or 0)
    return it, ot


def stage_usage(usage: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """{"Planner": {"prompt_tokens": .., "completion_tokens": ..}} -> the flat keys ref_efficiency reads."""
    out: dict[str, int] = {}
    for stage, u in usage.items():
        for k, v in u.items():
            out[f"{stage}_{k}"] = v
    return out


# -- paper mode ---------------------------------------------------------------------------------------------

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
    best = max([sim(intent, scenario, backend), *(sim(intent, a, backend) for a in ZH_SCENARIO_ALIASES.get(scenario, ()))])
    return 1.0 if best >= ID_THRESHOLD else 0.0


_MODE_WORDS = {"walk": ("walk", "walking", "on foot", "foot", "步行"), "bike": ("bike", "bicycle", "cycling", "cycle", "骑行"),
               "drive": ("drive", "driving", "car", "驾车", "开车"),
               "transit": ("transit", "public transport", "bus", "tram", "metro", "subway", "train", "公交", "地铁")}
_SLOT_ALIASES = {"from": "origin", "start": "origin", "to": "destination", "end": "destination",
                 "via": "waypoints", "waypoint": "waypoints", "stops": "waypoints", "preference": "preferences",
                 "travel_mode": "mode", "anchor": "near", "category": "category",
                 "keyword": "category", "arrive_by": "time", "depart_at": "time", "date": "time"}
_SET_SLOTS = {"preferences", "avoid", "waypoints", "require"}


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
    "POI Query": ("locate",), "Geolocation Query": ("locate",), "Nearby Query": ("locate", "nearby"),
    "Weather Query": ("weather",), "Traffic Info Query": ("locate", "traffic"),
    "Route Property Query": ("locate", "route"), "Arrival/Departure Time Query": ("locate", "route", "time"),
    "Point-to-Point Planning": ("locate", "route"), "Multi-stop Planning": ("locate", "multi_stop_route"),
    "Option-Constrained Route Planning": ("locate", "preference_route"),
    "Route-Constrained Planning": ("locate", "route"),
}
_ACTION_RX = {
    "locate": r"locat|coordinat|geocod|address|where (?:is|am)|position|look up|find (?:the )?(?:place|poi)|"
              r"search (?:for )?(?:the )?(?:place|poi)|query_poi|reverse_geocoding|坐标|定位|位置|经纬度|地址|查询.*?(?:在哪|：)",
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
    a = _args(arguments)
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


def paper_decomposition(steps: list[str] | None, scenario: str,
                        actions: list[set[str]] | None = None) -> tuple[float | None, float | None]:
    """(DEC_P, DEC_R) with the paper's formulas: P = |V_gold matched by some step| / |V_gold|,
    R = |steps matching some gold action| / |V_pred|. A step's actions come from its text and, when given, from
    the tool it called. No steps: (0, 0). Unknown scenario: (None, None)."""
    gold = GOLD_ACTIONS.get(scenario)
    if not gold:
        return None, None
    steps = steps or []
    per_step = [step_actions(s) | (actions[i] if actions and i < len(actions) else set()) for i, s in enumerate(steps)]
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
    sc = sum(1.0 if (c.valid if c.valid is not None else validator(c.name, c.arguments)) else 0.0
             for c in calls) / len(calls)
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
        if c.ok is False and not any(d.ok and d.name == c.name for d in pred.calls[i + 1:]):
            return 0.0
    return 1.0


_DIST_RX = re.compile(r"(\d+(?:[.,]\d+)?)\s*(km|kilomet(?:er|re)s?|公里|千米|m\b|met(?:er|re)s?|米)", re.IGNORECASE)
_HOUR_RX = re.compile(r"(\d+(?:\.\d+)?)\s*(?:h\b|hours?|hrs?|小时)", re.IGNORECASE)
_MIN_RX = re.compile(r"(\d+(?:\.\d+)?)\s*(?:min\b|mins\b|minutes?|分钟)", re.IGNORECASE)
_CLOCK_RX = re.compile(r"\b(\d{1,2})[:.](\d{2})\s*(am|pm|a\.m\.|p\.m\.)?", re.IGNORECASE)


def stated_distances_m(text: str) -> list[float]:
    """Every distance the text states, in metres."""
    vals = []
    for (num, unit) in _DIST_RX.findall(text or ""):
        v = float(num.replace(",", "."))
        u = unit.lower()
        vals.append(v * 1000 if u in ("km", "公里", "千米") or u.startswith("kilomet") else v)
    return vals


def stated_durations_s(text: str) -> list[float]:
    """Every duration the text states: minutes alone, hours alone, and "H hours M minutes" combined."""
    t = text or ""
    mins = [(m.start(), float(m.group(1))) for m in _MIN_RX.finditer(t)]
    hours = [(m.end(), float(m.group(1))) for m in _HOUR_RX.finditer(t)]
    out = [v * 60 for _, v in mins] + [v * 3600 for _, v in hours]
    for end, h in hours:
        nxt = [v for start, v in mins if 0 <= start - end <= 8]
        if nxt:
            out.append(h * 3600 + nxt[0] * 60)
    return out


def stated_clocks_min(text: str) -> list[int]:
    out = []
    for h, m, ampm in _CLOCK_RX.findall(text or ""):
        hh, mm = int(h), int(m)
        if ampm and ampm.lower().startswith("p") and hh < 12:
            hh += 12
        if ampm and ampm.lower().startswith("a") and hh == 12:
            hh = 0
        if hh < 24 and mm < 60:
            out.append(hh * 60 + mm)
    return out


def _route_call_matches(call: Call, want: Mapping[str, Any]) -> bool:
    if GT_ALIASES.get(call.name, call.name) != want.get("tool") or not call.ok:
        return False
    a = _args(call.arguments)
    for key in ("origin", "destination"):
        p, q = parse_lonlat(a.get(key)), parse_lonlat(want.get(key))
        if p is None or q is None or haversine_km(*p, *q) * 1000 > ROUTE_MATCH_M:
            return False
    wp_want = [parse_lonlat(w) for w in want.get("waypoints") or []]
    wp_got = [parse_lonlat(w) for w in a.get("waypoints") or []]
    if len(wp_want) != len(wp_got) or any(p is None or q is None or haversine_km(*p, *q) * 1000 > ROUTE_MATCH_M
                                          for p, q in zip(wp_got, wp_want)):
        return False
    if sorted(want.get("strategy") or []) != sorted(a.get("strategy") or []):
        return False
    return True


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
            near = any(haversine_km(lat, lon, ch.coord["lat"], ch.coord["lon"]) * 1000 <= ch.coord.get("max_m", 250)
                       for lon, lat in coords_in(text, lex))
        if not (named or near):
            return 0.0
    if ch.similar is not None:
        if not (ch.similar in text or sim(text, ch.similar, backend) > ANSWER_THRESHOLD):
            return 0.0
    return 1.0


# -- one episode ----------------------------------------------------------------------------------------------

def score(pred: Prediction, truth: Truth, mode: str, backend: Backend,
          validator: Callable[[str, Any], bool] | None = None, cumulative: bool = False) -> dict[str, float | None]:
    """All eleven metrics for one episode. ``cumulative``: the reference's Plan-and-Execute tool capture."""
    if mode not in MODES:
        raise ValueError(f"unknown metric mode {mode!r}; use paper or reference")
    out: dict[str, float | None] = dict.fromkeys(METRICS)
    if mode == "paper":
        validator = validator or (lambda n, a: schema_valid(n, a, truth.lang))
        out["ID"] = paper_intent(pred.intent, truth.scenario, backend)
        out["IE"] = paper_extraction(pred.constraints, truth.constraints)
        out["DEC_P"], out["DEC_R"] = paper_decomposition(pred.steps, truth.scenario, pred.step_actions)
        out["TS_P"], out["TS_R"], out["SC"] = paper_tools(pred.calls, truth, validator)
        out["DR"] = paper_delivery(pred)
        out["FPR"] = paper_final_pass(pred, truth, backend, out["DR"])
        out["IT"] = float(pred.prompt_tokens) if pred.prompt_tokens is not None else None
        out["OT"] = float(pred.completion_tokens) if pred.completion_tokens is not None else None
        return out
    lex = LEXICONS.get(truth.lang, LEXICONS["en"])
    if pred.usage is not None:
        it, ot = ref_efficiency(pred.usage)
    elif pred.errored:
        it, ot = 0, 0
    else:
        it, ot = pred.prompt_tokens or 0, pred.completion_tokens or 0
    out["IT"], out["OT"] = float(it), float(ot)
    if pred.errored:
        return out
    if pred.intent is not None:
        out["ID"] = ref_intent(pred.intent, truth.scenario, backend, lex)
        out["IE"] = ref_extraction(pred.thinking, pred.steps, truth.scenario, truth.slots)
        out["DEC_P"], out["DEC_R"] = ref_decomposition(pred.steps, truth.scenario, lex)
    rows = cumulative_capture(pred.calls) if cumulative else [(c.name, c.arguments) for c in pred.calls]
    out["TS_P"], out["TS_R"], out["SC"] = ref_tools(rows, truth)
    report = pred.report if pred.report is not None else (pred.content or "")
    if report.strip():
        try:
            out["DR"], out["FPR"] = ref_answer(report, truth, backend, lex)
        except (ValueError, TypeError):
            out["DR"] = out["FPR"] = None  # compute raised: the reference keeps the error and drops the case
    return out


# -- aggregation ----------------------------------------------------------------------------------------------

def mean_of(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def aggregate(rows: list[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Per metric, the mean over the episodes where it is defined (None if none)."""
    return {m: mean_of(r.get(m) for r in rows) for m in METRICS}


class RefResult(BaseModel):
    """One result of the reference pipeline's metric (for reproducing its aggregation exactly)."""

    score: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


def aggregate_reference(results: list[RefResult]) -> dict[str, Any]:
    """The reference aggregate: per numeric detail field, the mean over successful results that have it (bool as
    0/1), rounded to 4 places; average_score is the mean of the (mostly dummy) scores."""
    ok = [r for r in results if r.error is None]
    fields: dict[str, list[float]] = {}
    for r in ok:
        for k, v in r.details.items():
            if isinstance(v, (bool, int, float)) and not (isinstance(v, float) and math.isnan(v)):
                fields.setdefault(k, []).append(float(v))
    return {"sub_scores": {k: round(sum(v) / len(v), 4) for k, v in fields.items()},
            "average_score": round(sum(r.score for r in ok) / len(ok), 4) if ok else 0.0,
            "total": len(results), "successful": len(ok)}
