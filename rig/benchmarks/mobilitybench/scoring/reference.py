"""Reference mode: what the public evaluator computes (reference notes A3). Cumulative tool-call capture for
Plan-and-Execute, cases missing from a metric's table dropped (None), TS-P/TS-R as type-level recall and
instance-level non-redundancy with its rounding, FPR for route scenarios as "produced a route index", Chinese keyword
rules (or their English translation on English data)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rig.benchmarks.mobilitybench.lexicon import EVAL_TYPE, REF_SLOTS, REF_UNREACHABLE_SLOTS, Lexicon, lookup_scenario
from rig.benchmarks.mobilitybench.scoring.records import (
    ANSWER_THRESHOLD,
    ID_THRESHOLD,
    Call,
    Truth,
    call_args,
    gt_calls,
)
from rig.benchmarks.mobilitybench.scoring.text import (
    COORD_RX,
    coords_in,
    count_words,
    fenced_json,
    has_word,
    haversine_km,
    repair_literal,
)
from rig.benchmarks.mobilitybench.similarity import Backend, CharJaccard, sim
from rig.benchmarks.mobilitybench.tools import GT_ALIASES, parse_lonlat

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
    pred = [(GT_ALIASES.get(n, n), call_args(a)) for n, a in calls]
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



def ref_content(answer: str) -> str:
    block = fenced_json(answer)
    if block is not None and str(block.get("content") or "").strip():
        return str(block["content"])
    return answer or ""


def ref_route_index(answer: str, lex: Lexicon) -> str | None:
    block = fenced_json(answer)
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
        dr = idx not in (None, "") or count_words(content, lex.route_kw) >= 2
    elif etype in ("poi", "location"):
        dr = bool(COORD_RX.search(content)) or count_words(content, lex.address_kw) >= 2
    elif etype == "nearby":
        dr = count_words(content, lex.nearby_kw) >= 1 or len(content) > 20
    elif etype == "weather":
        dr = count_words(content, lex.weather_kw) >= 1
    elif etype == "traffic":
        dr = count_words(content, lex.traffic_kw) >= 1
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
        return 1.0 if count_words(content, lex.route_kw + lex.route_info_extra) >= 2 else 0.0
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
        near = g.get("near_poi_ans")
        near = repair_literal(near) if isinstance(near, str) else near
        pois = _dig(near, "data", "pois")
        if pois is None and isinstance(_dig(near, "data"), list):
            pois = _dig(near, "data")
        if not pois:
            return 1.0
        for p in pois[:5]:
            name = str(p.get("name", "")) if isinstance(p, dict) else ""
            if name and (name in content or sim(content, name, backend) > ANSWER_THRESHOLD):
                return 1.0
        return 1.0 if sim(content, str(near), backend) > ANSWER_THRESHOLD else 0.0
    if etype == "traffic":
        desc = str(_dig(g.get("ans"), "trafficinfo", "description") or "")
        if desc:
            present = [k for k in lex.traffic_judge_kw if has_word(desc, k)]
            if len(present) >= 2:
                return 1.0 if count_words(content, present) >= 2 else 0.0
            return 1.0 if desc in content or sim(content, desc, backend) > ANSWER_THRESHOLD else 0.0
        n = count_words(content, lex.traffic_judge_kw)
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

