"""CallNavi AST match and API-routing exact match.

Semantics follow the CallNavi paper (section 5.1) as operationalised by the
upstream ``Judge_para.AST`` / ``Judge_call`` scripts (see
``docs/reference/benchmark-references.md`` B3.2, B3.3). Deliberate differences:

* The upstream ``AST`` crashes (KeyError/TypeError) on some malformed
  predictions; here every prediction yields a verdict, never an exception.
* Each verdict carries a ``reason`` from a fixed taxonomy so failures can be
  tallied. Checks run in the paper's pipeline order (shape, then API list, then
  parameter keys for *all* calls, then values), so the reason is the first
  failure in that order. The three flags are identical to upstream.
* ``lenient_types=True`` is a rig extension (default off): scalars compare as
  normalised strings, so ``"1000" == 1000``. The paper says "identical", so the
  default stays strict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "API_LIST_MISMATCH",
    "API_NOT_A_LIST",
    "EMPTY_PREDICTION",
    "MISSING_KEY",
    "MISSING_PARAMETER_KEY",
    "OK",
    "PARAMETERS_NOT_A_LIST",
    "PARAMETER_COUNT_MISMATCH",
    "PARAMETER_NOT_A_DICT",
    "PREDICTION_NOT_A_DICT",
    "REASONS",
    "VALUE_MISMATCH",
    "WILDCARD",
    "AstVerdict",
    "ast_match",
    "routing_exact_match",
    "routing_normalise",
]

#: Placeholder used in the CallNavi ground truth for unknown/dependent values.
WILDCARD = "$$$"

# Error taxonomy (stable strings: they end up in result files and reports).
OK = "ok"
EMPTY_PREDICTION = "empty_prediction"  # {}, None, "" (wash failure)
PREDICTION_NOT_A_DICT = "prediction_not_a_dict"  # str, list, number, ...
MISSING_KEY = "missing_key_API_or_parameters"
API_NOT_A_LIST = "api_not_a_list"
PARAMETERS_NOT_A_LIST = "parameters_not_a_list"  # upstream: KeyError (B5.1 k)
API_LIST_MISMATCH = "api_list_mismatch"
PARAMETER_COUNT_MISMATCH = "parameter_count_mismatch"
PARAMETER_NOT_A_DICT = "parameter_not_a_dict"
MISSING_PARAMETER_KEY = "missing_parameter_key"
VALUE_MISMATCH = "value_mismatch"

REASONS: frozenset[str] = frozenset(
    {
        OK,
        EMPTY_PREDICTION,
        PREDICTION_NOT_A_DICT,
        MISSING_KEY,
        API_NOT_A_LIST,
        PARAMETERS_NOT_A_LIST,
        API_LIST_MISMATCH,
        PARAMETER_COUNT_MISMATCH,
        PARAMETER_NOT_A_DICT,
        MISSING_PARAMETER_KEY,
        VALUE_MISMATCH,
    }
)


@dataclass(frozen=True)
class AstVerdict:
    """Outcome of comparing one prediction with its ground truth.

    ``order``: API list matches (ordered, case-sensitive) *and* the parameter
    list has the GT length. ``structure``: additionally every GT parameter key
    is present. ``ast``: additionally every non-wildcard value is equal.
    """

    order: bool
    structure: bool
    ast: bool
    reason: str


def _fail(reason: str) -> AstVerdict:
    return AstVerdict(order=False, structure=False, ast=False, reason=reason)


def _is_wildcard(gt_value: object) -> bool:
    # Upstream treats the literal "$$$" and an empty dict (ban010 holderDetails)
    # as "anything goes"; the key must still be present.
    return (isinstance(gt_value, str) and gt_value == WILDCARD) or (isinstance(gt_value, dict) and not gt_value)


def _scalar_text(value: object) -> str:
    """Canonical text of a scalar for lenient comparison (1000, 1000.0, "1000")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value).strip()


def _lenient_equal(a: object, b: object) -> bool:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_lenient_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_lenient_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (Mapping, list, tuple)) or isinstance(b, (Mapping, list, tuple)):
        return False
    return _scalar_text(a) == _scalar_text(b)


def _values_equal(gt_value: object, pred_value: object, lenient: bool) -> bool:
    try:
        if lenient:
            return _lenient_equal(gt_value, pred_value)
        # Python equality as upstream: "1000" != 1000, but note 1 == 1.0 == True.
        return bool(gt_value == pred_value)
    except Exception:  # exotic objects (e.g. arrays) with odd __eq__: not equal
        return False


def _check_gt(gt: object) -> None:
    # The GT is trusted data; a malformed one is a loader bug, so fail loudly.
    if not isinstance(gt, Mapping) or "API" not in gt or "parameters" not in gt:
        raise ValueError("ground truth must be a dict with 'API' and 'parameters'")
    if not isinstance(gt["API"], list) or not isinstance(gt["parameters"], list):
        raise ValueError("ground truth 'API' and 'parameters' must be lists")
    if not all(isinstance(p, Mapping) for p in gt["parameters"]):
        raise ValueError("ground truth 'parameters' must be a list of dicts")


def ast_match(pred: object, gt: dict, *, lenient_types: bool = False) -> AstVerdict:
    """Score a parsed prediction against a CallNavi ground truth (B3.3).

    Never raises on a malformed *prediction* (it is model output); raises
    ``ValueError`` on a malformed *ground truth*. Upstream quirk kept: a
    parameter-list length mismatch sets ``order`` False too, even when the API
    list matched. GT ``parameters == []`` with one API (6 shopping items) is
    matched only by a predicted ``[]``.
    """
    _check_gt(gt)

    if pred is None or (isinstance(pred, str) and not pred.strip()):
        return _fail(EMPTY_PREDICTION)
    if not isinstance(pred, Mapping):
        return _fail(PREDICTION_NOT_A_DICT)
    if not pred:
        return _fail(EMPTY_PREDICTION)
    if "API" not in pred or "parameters" not in pred:
        return _fail(MISSING_KEY)

    pred_api = pred["API"]
    pred_params = pred["parameters"]
    if not isinstance(pred_api, list):
        return _fail(API_NOT_A_LIST)
    if not isinstance(pred_params, list):
        return _fail(PARAMETERS_NOT_A_LIST)

    gt_api: list = gt["API"]
    gt_params: list = gt["parameters"]
    if pred_api != gt_api:
        return _fail(API_LIST_MISMATCH)
    if len(pred_params) != len(gt_params):
        return _fail(PARAMETER_COUNT_MISMATCH)
    if not all(isinstance(p, Mapping) for p in pred_params):
        return _fail(PARAMETER_NOT_A_DICT)

    # Structure: every GT key present in the aligned predicted call. Extra
    # predicted keys are never penalised.
    for gt_call, pred_call in zip(gt_params, pred_params, strict=True):
        if any(k not in pred_call for k in gt_call):
            return AstVerdict(order=True, structure=False, ast=False, reason=MISSING_PARAMETER_KEY)

    for gt_call, pred_call in zip(gt_params, pred_params, strict=True):
        for key, gt_value in gt_call.items():
            if _is_wildcard(gt_value):
                continue
            if not _values_equal(gt_value, pred_call[key], lenient_types):
                return AstVerdict(order=True, structure=True, ast=False, reason=VALUE_MISMATCH)

    return AstVerdict(order=True, structure=True, ast=True, reason=OK)


# Characters Judge_call deletes before comparing (B3.2). "\r" is added so that
# CRLF output behaves like LF output; everything else is as upstream.
_ROUTING_DELETE = str.maketrans("", "", "'\"[]\n\r `\\")


def routing_normalise(text: str) -> str:
    """Normalise a routing answer the way ``Judge_call`` does (B3.2).

    Commas survive as separators, so order and count still matter; prose or a
    fence language tag (```` ```json ````) around the list makes it fail, as
    upstream.
    """
    return str(text).translate(_ROUTING_DELETE).lower()


def routing_exact_match(pred_text: str | Sequence[str] | None, gt_apis: list[str]) -> bool:
    """Routing exact match: normalised prediction equals normalised ``str(gt_apis)``.

    ``pred_text`` may be the raw model text or an already parsed list of names.
    """
    if pred_text is None:
        return False
    if isinstance(pred_text, str):
        pred_norm = routing_normalise(pred_text)
    else:
        pred_norm = routing_normalise(str([str(name) for name in pred_text]))
    return pred_norm == routing_normalise(str(list(gt_apis)))
