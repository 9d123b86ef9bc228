"""CallNavi's per-reply scores in its two metric modes: `paper` (rig's deterministic parser and AST match) and
`reference` (as the public judge scripts score, `reference.py`); every reply is scored in each mode its format
allows, the main mode's scores also under their plain keys."""

from __future__ import annotations

from typing import Any

from rig.benchmarks.callnavi.parse import parse_answer
from rig.benchmarks.callnavi.reference import ref_ast, ref_routing_match, ref_wash
from rig.scoring.ast_match import ast_match, routing_exact_match

MODES = ("paper", "reference")


def score_output(
    text: str, gt: dict, task: str, fmt: str, mode: str = "paper"
) -> tuple[dict[str, float | None], Any, str | None]:
    """Scores for one answer, the parsed value, and the first failure reason (None when fully correct)."""
    if mode == "reference":
        return _score_reference(text, gt, task)
    if task == "routing":
        value, err = parse_answer(text, fmt, list)
        if value is not None and all(isinstance(v, str) for v in value):
            ok = [v.strip().lower() for v in value] == [a.lower() for a in gt["API"]]
        elif fmt == "json":
            ok = routing_exact_match(text, gt["API"])  # upstream's string normalisation, for prose-ish lists
        else:
            ok = False
        return {"routing": float(ok)}, value, None if ok else (f"parse: {err}" if err else "routing: wrong API list")
    value, err = parse_answer(text, fmt, dict)
    if value is None:
        return {"syntax": 0.0, "structure": 0.0, "ast": 0.0, "order": 0.0}, None, f"parse: {err}"
    v = ast_match(value, gt)
    scores: dict[str, float | None] = {
        "syntax": 1.0,
        "structure": float(v.structure),
        "ast": float(v.ast),
        "order": float(v.order),
    }
    return scores, value, None if v.ast else f"ast: {v.reason}"


def scored_modes(fmt: str) -> tuple[str, ...]:
    """The modes a reply in this format is scored in: the judge scripts read JSON answers only."""
    return MODES if fmt == "json" else ("paper",)


def with_modes(by_mode: dict[str, dict[str, float | None]], main: str) -> dict[str, float | None]:
    """The main mode's scores under their plain keys (what Table 4, the headline and compare read), and every mode's
    also under ``<mode>:<key>``, so one run shows where the judge scripts' rules change a number."""
    out = dict(by_mode[main])
    for m, scores in by_mode.items():
        out.update({f"{m}:{k}": v for k, v in scores.items()})
    return out


def score_both(text: str, gt: dict, task: str, fmt: str, main: str) -> tuple[dict[str, float | None], Any, str | None]:
    """``score_output`` in every mode the format allows; the parsed value and failure reason are the main mode's."""
    if main not in scored_modes(fmt):
        raise ValueError(f"callnavi mode {main} does not read {fmt} answers")
    each = {m: score_output(text, gt, task, fmt, m) for m in scored_modes(fmt)}
    _, value, reason = each[main]
    return with_modes({m: scores for m, (scores, _, _) in each.items()}, main), value, reason


def _score_reference(text: str, gt: dict, task: str) -> tuple[dict[str, float | None], Any, str | None]:
    if task == "routing":
        ok = ref_routing_match(text, gt["API"])
        return {"routing": 1.0 if ok else 0.0}, text, None if ok else "routing: normalised text differs (reference)"
    value, parsed = ref_wash(text)
    v = ref_ast(value, gt)
    scores: dict[str, float | None] = {
        "syntax": float(parsed),
        "structure": float(v.structure),
        "ast": float(v.ast),
        "order": float(v.order),
    }
    if v.ast:
        return scores, value, None
    return scores, value, ("ast: " if parsed else "parse: not JSON after the quote swap (no repair), ") + v.reason


def zero_scores(task: str) -> dict[str, float | None]:
    """A task's scores when there is no reply to score (an engine error)."""
    if task == "routing":
        return {"routing": 0.0}
    return {"syntax": 0.0, "structure": 0.0, "ast": 0.0, "order": 0.0}
