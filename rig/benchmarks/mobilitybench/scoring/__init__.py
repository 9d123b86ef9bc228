"""MobilityBench's eleven metrics, in two modes (``paper.py`` and ``reference.py``).

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

from collections.abc import Callable
from typing import Any

from rig.benchmarks.mobilitybench.lexicon import LEXICONS
from rig.benchmarks.mobilitybench.scoring.paper import (
    paper_decomposition,
    paper_delivery,
    paper_extraction,
    paper_final_pass,
    paper_intent,
    paper_tools,
    tool_actions,
)
from rig.benchmarks.mobilitybench.scoring.records import METRICS, MODES, Call, Checks, ConstraintItem, Prediction, Truth
from rig.benchmarks.mobilitybench.scoring.reference import (
    cumulative_capture,
    ref_answer,
    ref_content,
    ref_decomposition,
    ref_efficiency,
    ref_extraction,
    ref_intent,
    ref_route_index,
    ref_tools,
    stage_usage,
)
from rig.benchmarks.mobilitybench.scoring.text import (
    repair_literal,
    stated_clocks_min,
    stated_distances_m,
    stated_durations_s,
)
from rig.benchmarks.mobilitybench.similarity import Backend
from rig.benchmarks.mobilitybench.tools import schema_valid

__all__ = [
    "METRICS",
    "MODES",
    "Call",
    "Checks",
    "ConstraintItem",
    "Prediction",
    "Truth",
    "classify",
    "cumulative_capture",
    "paper_decomposition",
    "paper_delivery",
    "paper_extraction",
    "paper_final_pass",
    "paper_intent",
    "paper_tools",
    "ref_answer",
    "ref_content",
    "ref_decomposition",
    "ref_efficiency",
    "ref_extraction",
    "ref_intent",
    "ref_route_index",
    "ref_tools",
    "repair_literal",
    "score",
    "stage_usage",
    "stated_clocks_min",
    "stated_distances_m",
    "stated_durations_s",
    "tool_actions",
]


def score(
    pred: Prediction,
    truth: Truth,
    mode: str,
    backend: Backend,
    validator: Callable[[str, Any], bool] | None = None,
    cumulative: bool = False,
) -> dict[str, float | None]:
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
        out["DR"] = delivered = paper_delivery(pred)
        out["FPR"] = paper_final_pass(pred, truth, backend, delivered)
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
    rows = cumulative_capture(pred.calls, pred.workers) if cumulative else [(c.name, c.arguments) for c in pred.calls]
    out["TS_P"], out["TS_R"], out["SC"] = ref_tools(rows, truth)
    report = pred.report if pred.report is not None else (pred.content or "")
    if report.strip():
        try:
            out["DR"], out["FPR"] = ref_answer(report, truth, backend, lex)
        except (ValueError, TypeError):
            out["DR"] = out["FPR"] = None  # compute raised: the reference keeps the error and drops the case
    return out


def classify(stop: str, scores: dict[str, float | None]) -> str | None:
    """Why an episode did not pass (None when FPR is 1)."""
    if scores.get("FPR") == 1.0:
        return None
    if stop in ("max_steps", "format_errors", "no_plan"):
        return stop
    if stop != "final":
        return "no_final_answer"
    if not scores.get("DR"):
        return "not_delivered"
    return "wrong_answer"
