"""CallNavi reference mode: what the public judge scripts compute, without their GPT repair step.

Written from the behaviour of the upstream scripts (reference notes B3.1-B3.3), not from their code:

* routing (``Judge_call``): delete quotes, brackets, newlines, spaces, backticks and backslashes from the raw text,
  lower-case, compare with the same normalisation of ``str(gt_api_list)``. A ```` ```json ```` fence leaves "json"
  in the string (no match); a space inside an API name disappears (match).
* syntax (``wash``): swap every ``'`` for ``"``, delete the ```` ```json ```` and ```` ``` ```` markers, ``json.loads``.
  A failure would go to GPT-4o repair; here it becomes ``{}``, as when the repair also fails.
* AST (``Judge_para.AST``): Python operators on whatever the wash produced. Where those operators raise (a
  ``parameters`` dict of the right length, a string entry checked for a non-wildcard value, a number as the
  answer), the upstream script stops; here the episode scores False on all three flags, reason ``reference_crash``.
"""

from __future__ import annotations

import json
from typing import Any

from rig.scoring.ast_match import WILDCARD, AstVerdict

_DELETE = str.maketrans("", "", "'\"[]\n `\\")  # exactly Judge_call's characters: no "\r", unlike rig's paper mode

REFERENCE_CRASH = "reference_crash"


def ref_routing_normalise(text: str) -> str:
    return str(text).translate(_DELETE).lower()


def ref_routing_match(text: str, gt_apis: list[str]) -> bool:
    return ref_routing_normalise(text) == ref_routing_normalise(str(list(gt_apis)))


def ref_wash(text: str) -> tuple[Any, bool]:
    """(washed value, directly parseable). Not parseable gives ``{}``: the repair step is not run."""
    body = text.replace("'", '"').replace("```json", "").replace("```", "")
    try:
        return json.loads(body), True
    except (ValueError, RecursionError):  # deep nesting is a reply that does not parse, never a crash
        return {}, False


def _verdict(order: bool, structure: bool, ast: bool, reason: str) -> AstVerdict:
    return AstVerdict(order=order, structure=structure, ast=ast, reason=reason)


def ref_ast(pred: Any, gt: dict) -> AstVerdict:
    """Judge_para's three flags on a washed prediction; Python's own ``==``, ``in`` and ``len`` throughout."""
    try:
        return _ref_ast(pred, gt)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        return _verdict(False, False, False, f"{REFERENCE_CRASH}: {type(e).__name__} (the upstream script stops here)")


def _ref_ast(pred: Any, gt: dict) -> AstVerdict:
    if pred == {} or "API" not in pred or "parameters" not in pred:
        return _verdict(False, False, False, "empty_or_missing_key")
    if pred == gt:
        return _verdict(True, True, True, "ok")
    if pred["API"] != gt["API"]:
        return _verdict(False, False, False, "api_list_mismatch")
    gt_params, pred_params = gt["parameters"], pred["parameters"]
    if len(gt_params) != len(pred_params):
        return _verdict(False, False, False, "parameter_count_mismatch")
    structure = ast = True
    reason = "ok"
    for i, gt_call in enumerate(gt_params):
        for key in gt_call:
            # `in` on a string entry is a substring test, as upstream
            if key not in pred_params[i]:
                structure = ast = False
                reason = "missing_parameter_key"
                break
            gt_value = gt_call[key]
            if gt_value != WILDCARD and gt_value != {} and gt_value != pred_params[i][key]:
                ast = False
                reason = reason if reason != "ok" else "value_mismatch"
    return _verdict(True, structure, ast, reason)
