"""Reference mode: what the public evaluator computes (reference notes A3). Cumulative tool-call capture for
Plan-and-Execute, cases missing from a metric's table dropped (None), TS-P/TS-R as type-level recall and
instance-level non-redundancy with its rounding, FPR for route scenarios as "produced a route index", Chinese keyword
rules (or their English translation on English data)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rig.benchmarks.mobilitybench.lexicon import (
    EVAL_TYPE,
    REF_SLOTS,
    REF_UNREACHABLE_SLOTS,
    SCENARIOS,
    Lexicon,
    lookup_scenario,
)
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
    has_word,
    haversine_km,
    norm,
    repair_literal,
)
from rig.benchmarks.mobilitybench.similarity import Backend, CharJaccard
from rig.benchmarks.mobilitybench.tools import parse_lonlat

REF_COORD_KM = 1.0

# Reference tool-argument checks (configs/evaluation/default.yaml).
CHECK_MIN: dict[str, tuple[str, ...]] = {
    "query_poi": ("keywords",),
    "driving_route": ("origin", "destination"),
    "walking_route": ("origin", "destination"),
    "bicycling_route": ("origin", "destination"),
    "bus_route": ("origin", "destination"),
    "weather_query": ("city",),
    "reverse_geocoding": ("longitude", "latitude"),
    "search_around_poi": ("location", "keywords"),
    "traffic_status": ("name", "city"),
}
CHECK_MAX: dict[str, tuple[str, ...]] = {
    "query_poi": ("keywords", "city"),
    "driving_route": ("origin", "destination", "waypoints", "strategy"),
    "walking_route": ("origin", "destination"),
    "bicycling_route": ("origin", "destination"),
    "bus_route": ("origin", "destination", "strategy"),
    "weather_query": ("city", "need_forecast"),
    "reverse_geocoding": ("longitude", "latitude", "radius"),
    "search_around_poi": ("location", "keywords", "radius"),
    "traffic_status": ("name", "city"),
}


def ref_intent(intent: str | None, scenario: str, backend: Backend, lex: Lexicon) -> float | None:
    """ID: 1 when sim(intent, the scenario's label) >= 0.7. None when there is no planner output.

    The rig's prompts ask for one of the eleven scenario names (the paper's task scenarios), not the reference's
    intent labels, which its prompt never shows: a prediction that names a scenario is read as that scenario's label
    (the four route scenarios share one there), other text is compared as written, as the reference does."""
    if intent is None:
        return None
    label = lookup_scenario(lex.intent_labels, scenario) or "Unknown intent"
    named = next((s for s in SCENARIOS if norm(s) == norm(intent)), None)
    if named is not None:
        intent = lex.intent_labels[named]
    b = CharJaccard(lower=True) if isinstance(backend, CharJaccard) else backend  # the ID copy lower-cases
    return 1.0 if ref_sim(intent, label, b) >= ID_THRESHOLD else 0.0  # unstripped, as there


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
    pred = [(n, call_args(a)) for n, a in calls]  # only GT names are renamed there: a call of the GT's name misses
    gt_names, pred_names = Counter(n for n, _ in gt), Counter(n for n, _ in pred)
    # Rounded to 4 decimals as the reference rounds them; TS_R subtracts the rounded redundancy, so 1 - 0.3333
    # stays 0.6667000000000001, bit for bit.
    ts_p = round(len(set(gt_names) & set(pred_names)) / len(set(gt_names)), 4)
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
    sc = round(sum(scores) / len(scores), 4) if scores else 0.0
    return ts_p, ts_r, sc


def cumulative_capture(calls: list[Call], workers: list[int] | None = None) -> list[tuple[str, Any]]:
    """The reference's tool table for a Plan-and-Execute run: one record per worker, listing every call in that
    worker's history, i.e. the calls of all earlier plan steps, then its own. ``workers``: the plan step of each
    worker run, in order (``Call.worker`` indexes it). Parallel workers of a step each see only earlier steps, so
    ``[[q1],[q2,d]]`` gives q1 | q1 q2 | q1 d. A worker that made no call still finds the earlier calls in its
    history (the reference then marks it completed and records them); one with an empty history leaves no record.
    Without ``workers`` (results stored before it existed) each step is taken as one worker."""
    if workers is None:
        workers = sorted({c.task for c in calls})
        mine = {w: [c for c in calls if c.task == step] for w, step in enumerate(workers)}
    else:
        mine = {w: [c for c in calls if c.worker == w] for w in range(len(workers))}
    rows: list[tuple[str, Any]] = []
    for w, step in enumerate(workers):
        history = [c for c in calls if c.task < step]
        rows += [(c.name, c.arguments) for c in history + mine[w]]
    return rows


def _ref_block(answer: str) -> Any:
    """The reference's fence read: the text between the first ```json and the next ```, as JSON (None if it fails)."""
    if "```json" not in answer:
        return None
    try:
        return json.loads(answer.split("```json")[1].split("```")[0].strip())
    except (ValueError, RecursionError):  # deep nesting fails to parse like any other bad fence
        return None


def ref_content(answer: str) -> Any:
    """The fence's ``content`` when truthy (whitespace-only text is truthy: the reference returns it and then finds
    nothing delivered), else the whole answer. May be a non-string, as in the reference."""
    block = _ref_block(answer)
    if isinstance(block, dict) and block.get("content", ""):
        return block["content"]
    return answer


def ref_route_index(answer: str, lex: Lexicon) -> str | None:
    """The fence's ``route_index`` unless it is missing or null, then ``route_index: N`` in the text, then "方案N"
    (minus 1); ``None`` when none is found. ``route_index: null`` thus falls through to the text."""
    block = _ref_block(answer)
    if isinstance(block, dict) and block.get("route_index") is not None:
        return str(block["route_index"])
    m = re.search(r'route_index["\s:]+(\d+)', answer or "")
    if m:
        return m.group(1)
    m = re.search(lex.scheme, answer or "", re.IGNORECASE)
    if m:
        return str(int(m.group(1)) - 1)
    return None


def ref_sim(a: Any, b: Any, backend: Backend) -> float:
    """The reference's answer similarity: empty -> 0, containment -> 1 (no stripping), else the backend."""
    if not a or not b:
        return 0.0
    a, b = str(a), str(b)
    if a in b or b in a:
        return 1.0
    return backend.score(a, b)


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
    if len(content) == 0:
        content = answer
    etype = EVAL_TYPE.get(truth.scenario, "general")  # the answer metric looks the scenario up exactly
    idx = ref_route_index(answer, lex)
    g = truth.slots
    # Whitespace-only (or non-text) content delivers nothing; "nan" is compared without stripping, as there.
    if not isinstance(content, str) or not content.strip() or content.lower() == "nan":
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


def _ref_pass(etype: str, content: str, idx: str | None, g: Mapping[str, Any], backend: Backend, lex: Lexicon) -> float:
    if etype == "route":
        return 1.0 if idx and idx != "-1" else 0.0
    if etype == "route_custom":
        # The GT index is converted only when a rule reaches it: no predicted index -> 0 without reading it; an
        # index with no GT raises (int("")), which drops the case, as in the reference.
        if idx in ("", "-1") and _ref_int(g.get("matched_transit_index")) == 0:
            return 1.0
        if idx and int(idx) == _ref_int(g.get("matched_transit_index")):
            return 1.0
        return 0.0
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
            if gt in content or ref_sim(content, gt, backend) > ANSWER_THRESHOLD:
                return 1.0
        return 0.0
    if etype == "nearby":
        raw = g.get("near_poi_ans")
        if not raw or str(raw).lower() == "nan":
            return 0.0  # no ground truth: 0 (an empty POI list, below, scores 1)
        near = repair_literal(str(raw))  # the reference re-parses str() of the loaded cell
        if isinstance(near, dict):
            data = near.get("data", {})
            if not isinstance(data, dict):
                raise TypeError("near_poi_ans data is not a dict")  # .get on it raises there: the case drops
            pois = data.get("pois", [])
            if len(pois) == 0:
                return 1.0
            if isinstance(pois, list):
                for p in pois[:5]:
                    if isinstance(p, dict):
                        name = p.get("name", "")
                        if name and name in content:
                            return 1.0
                        if ref_sim(content, name, backend) > ANSWER_THRESHOLD:
                            return 1.0
        return 1.0 if ref_sim(content, str(raw), backend) > ANSWER_THRESHOLD else 0.0
    if etype == "traffic":
        desc = str(_dig(g.get("ans"), "trafficinfo", "description") or "")
        if desc:
            present = [k for k in lex.traffic_judge_kw if has_word(desc, k)]
            if len(present) >= 2:
                return 1.0 if count_words(content, present) >= 2 else 0.0
            return 1.0 if desc in content or ref_sim(content, desc, backend) > ANSWER_THRESHOLD else 0.0
        n = count_words(content, lex.traffic_judge_kw)
        return 1.0 if n >= 2 else 0.5 if n == 1 else 0.0
    # general: the route rule reads the index from the content there, not from the whole answer
    if g.get("route_ans"):
        cidx = ref_route_index(content, lex)
        return 1.0 if cidx and cidx != "-1" else 0.0
    if g.get("weather_description"):
        return _ref_weather(content, g, backend)
    if g.get("poi_result"):
        return _ref_poi(content, g, lex)
    return 0.0


def _ref_int(v: Any) -> int:
    """int() of the GT index as the reference sees it: a float from the sheet, "" when missing (which raises)."""
    if v is None:
        v = ""
    return int(float(v)) if isinstance(v, str) and v.strip() else int(v)


def _ref_weather(content: str, g: Mapping[str, Any], backend: Backend) -> float:
    gt = str(g.get("weather_description") or "")
    if not gt or gt == "nan":
        return 0.0
    return 1.0 if gt in content or ref_sim(content, gt, backend) > ANSWER_THRESHOLD else 0.0


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


def _first_int(data: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    for k in keys:
        if k in data:
            try:
                return int(data[k])
            except (ValueError, TypeError):
                pass
    return 0


def ref_efficiency(usage: Mapping[str, Any] | None) -> tuple[int, int]:
    """(IT, OT) from the reference's per-stage usage keys (exact spellings). A stage whose prompt and completion
    counts are both 0 (missing or zero) and that has a total is split 70/30, as there."""
    data = usage or {}
    it = ot = 0
    for st in _STAGES:
        p = _first_int(data, (f"{st}_prompt_tokens", f"{st} Prompt Tokens", f"{st}_input_tokens"))
        c = _first_int(data, (f"{st}_completion_tokens", f"{st} Completion Tokens", f"{st}_output_tokens"))
        if p == 0 and c == 0:
            for k in (f"{st}_total_tokens", f"{st}_Total_Tokens", f"{st} Total Tokens"):
                if k in data:
                    try:
                        total = int(data[k])
                    except (ValueError, TypeError):
                        continue
                    p = int(total * 0.7)
                    c = total - p
                    break
        it += p
        ot += c
    return it, ot


def stage_usage(usage: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """{"Planner": {"prompt_tokens": .., "completion_tokens": ..}} -> the flat keys ref_efficiency reads."""
    out: dict[str, int] = {}
    for stage, u in usage.items():
        for k, v in u.items():
            out[f"{stage}_{k}"] = v
    return out
