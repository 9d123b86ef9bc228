"""AST match and routing EM: benchmark-references.md B5.1 / B5.2 plus rig hardening."""

from __future__ import annotations

import copy

import pytest

from rig.scoring import ast_match as am
from rig.scoring.ast_match import AstVerdict, ast_match, routing_exact_match, routing_normalise

BAN042 = {
    "API": ["initiateTransfer", "getTransferStatus"],
    "parameters": [
        {"fromAccountID": "123456", "toAccountID": "654321", "amount": "1000", "currency": "USD"},
        {"transferID": "$$$"},
    ],
}
SHO005 = {"API": ["getCartItems"], "parameters": []}
BAN010 = {
    "API": ["updateAccountHolder"],
    "parameters": [{"accountID": "123456", "holderDetails": {}}],
}


def flags(v: AstVerdict) -> tuple[bool, bool, bool]:
    return (v.order, v.structure, v.ast)


def pred042() -> dict:
    return copy.deepcopy(BAN042)


# ---- B5.1 rows (a)-(k) -------------------------------------------------------


def test_a_identical() -> None:
    v = ast_match(pred042(), BAN042)
    assert flags(v) == (True, True, True) and v.reason == am.OK


def test_b_wildcard_value_ignored() -> None:
    p = pred042()
    p["parameters"][1]["transferID"] = "TX-42"
    v = ast_match(p, BAN042)
    assert flags(v) == (True, True, True) and v.reason == am.OK


def test_c_extra_key_not_penalised() -> None:
    p = pred042()
    p["parameters"][0]["note"] = "rent"
    assert flags(ast_match(p, BAN042)) == (True, True, True)


def test_d_missing_key() -> None:
    p = pred042()
    del p["parameters"][0]["toAccountID"]
    v = ast_match(p, BAN042)
    assert flags(v) == (True, False, False) and v.reason == am.MISSING_PARAMETER_KEY


def test_e_type_strict_value() -> None:
    p = pred042()
    p["parameters"][0]["amount"] = 1000
    v = ast_match(p, BAN042)
    assert flags(v) == (True, True, False) and v.reason == am.VALUE_MISMATCH


def test_f_parameter_count_mismatch_kills_order() -> None:
    p = pred042()
    p["parameters"] = p["parameters"][:1]
    v = ast_match(p, BAN042)
    assert flags(v) == (False, False, False) and v.reason == am.PARAMETER_COUNT_MISMATCH


def test_g_reversed_lists() -> None:
    p = pred042()
    p["API"].reverse()
    p["parameters"].reverse()
    v = ast_match(p, BAN042)
    assert flags(v) == (False, False, False) and v.reason == am.API_LIST_MISMATCH


def test_h_empty_dict() -> None:
    v = ast_match({}, BAN042)
    assert flags(v) == (False, False, False) and v.reason == am.EMPTY_PREDICTION


def test_i_gt_empty_parameters_list() -> None:
    v = ast_match({"API": ["getCartItems"], "parameters": [{}]}, SHO005)
    assert flags(v) == (False, False, False) and v.reason == am.PARAMETER_COUNT_MISMATCH
    v = ast_match({"API": ["getCartItems"], "parameters": []}, SHO005)
    assert flags(v) == (True, True, True) and v.reason == am.OK
    # Not deep-equal (extra top-level key) but still a match.
    v = ast_match({"API": ["getCartItems"], "parameters": [], "why": "x"}, SHO005)
    assert flags(v) == (True, True, True)


def test_j_empty_dict_gt_value_is_wildcard() -> None:
    p = {"API": ["updateAccountHolder"], "parameters": [{"accountID": "123456", "holderDetails": {"name": "A"}}]}
    assert flags(ast_match(p, BAN010)) == (True, True, True)
    # ...but the key must still be present.
    p = {"API": ["updateAccountHolder"], "parameters": [{"accountID": "123456"}]}
    assert flags(ast_match(p, BAN010)) == (True, False, False)


def test_k_parameters_dict_no_crash() -> None:
    p = {"API": ["getCartItems"], "parameters": {"cartID": "1"}}
    gt = {"API": ["getCartItems"], "parameters": [{"cartID": "1"}]}
    v = ast_match(p, gt)
    assert flags(v) == (False, False, False) and v.reason == am.PARAMETERS_NOT_A_LIST


# ---- hardening beyond upstream ----------------------------------------------


@pytest.mark.parametrize(
    "pred, reason",
    [
        (None, am.EMPTY_PREDICTION),
        ("", am.EMPTY_PREDICTION),
        ("  \n", am.EMPTY_PREDICTION),
        ('{"API": ["initiateTransfer"]}', am.PREDICTION_NOT_A_DICT),
        ([BAN042], am.PREDICTION_NOT_A_DICT),
        (42, am.PREDICTION_NOT_A_DICT),
        ({"API": ["initiateTransfer", "getTransferStatus"]}, am.MISSING_KEY),
        ({"parameters": []}, am.MISSING_KEY),
        ({"API": "initiateTransfer", "parameters": []}, am.API_NOT_A_LIST),
        ({"API": ["initiateTransfer", "getTransferStatus"], "parameters": None}, am.PARAMETERS_NOT_A_LIST),
        ({"API": ["initiateTransfer", "getTransferStatus"], "parameters": ["x", {}]}, am.PARAMETER_NOT_A_DICT),
        ({"API": ["initiatetransfer", "gettransferstatus"], "parameters": BAN042["parameters"]}, am.API_LIST_MISMATCH),
    ],
)
def test_malformed_predictions_never_raise(pred: object, reason: str) -> None:
    v = ast_match(pred, BAN042)
    assert flags(v) == (False, False, False)
    assert v.reason == reason
    assert v.reason in am.REASONS


def test_reason_prefers_structure_over_value() -> None:
    # Value wrong in call 0, key missing in call 1: structure failure is reported.
    p = pred042()
    p["parameters"][0]["amount"] = "999"
    p["parameters"][1] = {}
    v = ast_match(p, BAN042)
    assert flags(v) == (True, False, False) and v.reason == am.MISSING_PARAMETER_KEY


def test_wildcard_key_still_required() -> None:
    p = pred042()
    p["parameters"][1] = {"id": "x"}
    assert flags(ast_match(p, BAN042)) == (True, False, False)


def test_nested_dict_must_match_exactly() -> None:
    gt = {"API": ["f"], "parameters": [{"x": {"a": "1"}}]}
    assert flags(ast_match({"API": ["f"], "parameters": [{"x": {"a": "1", "b": "2"}}]}, gt)) == (True, True, False)


def test_lenient_types_extension() -> None:
    p = pred042()
    p["parameters"][0]["amount"] = 1000
    p["parameters"][0]["fromAccountID"] = 123456.0
    assert ast_match(p, BAN042).ast is False
    v = ast_match(p, BAN042, lenient_types=True)
    assert flags(v) == (True, True, True) and v.reason == am.OK
    p["parameters"][0]["amount"] = "1001"
    assert ast_match(p, BAN042, lenient_types=True).reason == am.VALUE_MISMATCH


def test_lenient_nested_and_containers() -> None:
    gt = {"API": ["f"], "parameters": [{"x": {"a": 1, "b": [1, "2"]}, "y": "1"}]}
    ok = {"API": ["f"], "parameters": [{"x": {"a": "1", "b": ["1", 2]}, "y": 1}]}
    assert ast_match(ok, gt, lenient_types=True).ast is True
    bad = {"API": ["f"], "parameters": [{"x": {"a": "1", "b": "1,2"}, "y": 1}]}
    assert ast_match(bad, gt, lenient_types=True).ast is False


def test_malformed_gt_raises() -> None:
    with pytest.raises(ValueError):
        ast_match({}, {"API": ["f"]})
    with pytest.raises(ValueError):
        ast_match({}, {"API": ["f"], "parameters": {"a": 1}})


def test_verdict_is_frozen() -> None:
    v = ast_match(pred042(), BAN042)
    with pytest.raises(AttributeError):
        v.ast = False  # type: ignore[misc]


# ---- B5.2 routing exact match ------------------------------------------------

GT_ROUTE = ["getAccountID", "getAccountBalance"]


@pytest.mark.parametrize(
    "pred, expected",
    [
        ("['getAccountID','getAccountBalance']", True),
        ('```\n["getaccountid", "getaccountbalance"]\n```', True),
        ("getAccountID, getAccountBalance", True),
        ("['getAccountBalance','getAccountID']", False),
        ("['getAccountID']", False),
        # Pinned upstream behaviour: prose or a fence language tag is not stripped.
        ("The APIs are ['getAccountID','getAccountBalance']", False),
        ('```json\n["getAccountID", "getAccountBalance"]\n```', False),
        ("['getAccountID',\r\n 'getAccountBalance']", True),
    ],
)
def test_routing_examples(pred: str, expected: bool) -> None:
    assert routing_exact_match(pred, GT_ROUTE) is expected


def test_routing_accepts_list_prediction() -> None:
    assert routing_exact_match(["getaccountid", "getAccountBalance"], GT_ROUTE) is True
    assert routing_exact_match(("getAccountID",), GT_ROUTE) is False
    assert routing_exact_match(None, GT_ROUTE) is False


def test_routing_normalise() -> None:
    assert routing_normalise("['A', \"b\"]\n`\\") == "a,b"
    assert routing_normalise(str(GT_ROUTE)) == "getaccountid,getaccountbalance"
