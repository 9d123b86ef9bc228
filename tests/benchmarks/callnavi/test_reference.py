"""CallNavi `-O mode=reference`: one test per rule where the public judge scripts read an answer differently from
paper mode. Ground truths are hand-made in the upstream shape (the notes' ban042 example, B5.1)."""

from __future__ import annotations

import pytest

from rig.benchmarks.base import DataError
from rig.benchmarks.callnavi.benchmark import CallNavi, callnavi_tables, score_output
from rig.benchmarks.callnavi.reference import ref_ast, ref_routing_match, ref_wash
from rig.records import EpisodeResult

GT = {
    "API": ["initiateTransfer", "getTransferStatus"],
    "parameters": [
        {"fromAccountID": "123456", "toAccountID": "654321", "amount": "1000", "currency": "USD"},
        {"transferID": "$$$"},
    ],
}
ROUTE = ["getAccountID", "getAccountBalance"]


def both(text: str, task: str, gt: dict = GT) -> tuple[dict, dict]:
    return score_output(text, gt, task, "json", "paper")[0], score_output(text, gt, task, "json", "reference")[0]


def test_json_fenced_routing_list_rejected_by_reference_only() -> None:
    paper, ref = both('```json\n["getAccountID", "getAccountBalance"]\n```', "routing", {"API": ROUTE})
    assert paper["routing"] == 1.0 and ref["routing"] == 0.0


def test_plain_fence_and_bare_names_accepted_by_reference() -> None:  # notes B5.2
    assert ref_routing_match('```\n["getaccountid", "getaccountbalance"]\n```', ROUTE)
    assert ref_routing_match("getAccountID, getAccountBalance", ROUTE)
    assert not ref_routing_match("['getAccountBalance','getAccountID']", ROUTE)
    assert not ref_routing_match("['getAccountID']", ROUTE)


def test_space_inside_api_name_accepted_by_reference_only() -> None:
    paper, ref = both('["get AccountID", "getAccount Balance"]', "routing", {"API": ROUTE})
    assert paper["routing"] == 0.0 and ref["routing"] == 1.0


def test_carriage_return_kept_by_reference() -> None:
    # Judge_call deletes "\n" but not "\r": a CRLF list fails there; paper mode reads the list
    paper, ref = both('[\r\n"getAccountID",\r\n"getAccountBalance"\r\n]', "routing", {"API": ROUTE})
    assert paper["routing"] == 1.0 and ref["routing"] == 0.0


def test_apostrophe_in_json_string_is_a_syntax_failure_in_reference() -> None:
    gt = {"API": ["addNote"], "parameters": [{"note": "customer's request"}]}
    text = '{"API": ["addNote"], "parameters": [{"note": "customer\'s request"}]}'
    paper, ref = both(text, "params", gt)
    assert paper["syntax"] == 1.0 and paper["ast"] == 1.0
    assert ref["syntax"] == 0.0 and ref["ast"] == 0.0  # washed to {} (no repair)


def test_single_quoted_dict_parses_in_both() -> None:
    text = (
        "{'API': ['initiateTransfer', 'getTransferStatus'], 'parameters': [{'fromAccountID': '123456', "
        "'toAccountID': '654321', 'amount': '1000', 'currency': 'USD'}, {'transferID': 'TX-42'}]}"
    )
    paper, ref = both(text, "params")
    assert paper["ast"] == ref["ast"] == 1.0


def test_other_fence_language_rejected_by_reference() -> None:
    text = '```JSON\n{"API": ["x"], "parameters": [{}]}\n```'
    assert ref_wash(text) == ({}, False)
    paper, ref = both(text, "params", {"API": ["x"], "parameters": [{}]})
    assert paper["ast"] == 1.0 and ref["ast"] == 0.0


def test_non_object_json_counts_as_syntax_valid_in_reference() -> None:
    paper, ref = both('["initiateTransfer"]', "params")
    assert paper["syntax"] == 0.0 and ref["syntax"] == 1.0 and ref["ast"] == 0.0


def test_string_parameter_entry_with_wildcard_value_passes_in_reference() -> None:
    # `key in "text"` is a substring test upstream, and a wildcard value is never read
    gt = {"API": ["getTransferStatus"], "parameters": [{"transferID": "$$$"}]}
    text = '{"API": ["getTransferStatus"], "parameters": ["transferID=TX-42"]}'
    paper, ref = both(text, "params", gt)
    assert paper["ast"] == paper["order"] == 0.0  # paper mode: an entry that is not an object fails
    assert ref["ast"] == ref["structure"] == ref["order"] == 1.0


def test_string_parameter_entry_with_real_value_is_a_reference_crash() -> None:
    gt = {"API": ["getAccount"], "parameters": [{"customerID": "C1"}]}
    v = ref_ast({"API": ["getAccount"], "parameters": ["customerID=C1"]}, gt)
    assert (v.order, v.structure, v.ast) == (False, False, False) and v.reason.startswith("reference_crash: TypeError")


def test_parameters_as_dict_is_a_reference_crash_or_count_mismatch() -> None:
    gt = {"API": ["getAccount"], "parameters": [{"customerID": "C1"}]}
    crash = ref_ast({"API": ["getAccount"], "parameters": {"customerID": "C1"}}, gt)
    assert crash.reason.startswith("reference_crash: KeyError")
    two = ref_ast({"API": ["getAccount"], "parameters": {"customerID": "C1", "x": 1}}, gt)
    assert (two.order, two.reason) == (False, "parameter_count_mismatch")


def test_numeric_value_differs_in_both_modes() -> None:  # B5.1 e: "1000" != 1000
    text = (
        '{"API": ["initiateTransfer", "getTransferStatus"], "parameters": [{"fromAccountID": "123456", '
        '"toAccountID": "654321", "amount": 1000, "currency": "USD"}, {"transferID": "$$$"}]}'
    )
    paper, ref = both(text, "params")
    assert (
        (ref["order"], ref["structure"], ref["ast"])
        == (1.0, 1.0, 0.0)
        == (paper["order"], paper["structure"], paper["ast"])
    )


@pytest.mark.parametrize(
    "pred,flags",
    [
        ({"API": GT["API"], "parameters": [GT["parameters"][0]]}, (False, False, False)),  # B5.1 f
        ({"API": GT["API"][::-1], "parameters": GT["parameters"][::-1]}, (False, False, False)),  # g
        ({}, (False, False, False)),  # h
        (
            {
                "API": GT["API"],
                "parameters": [
                    {k: v for k, v in GT["parameters"][0].items() if k != "toAccountID"},
                    {"transferID": "x"},
                ],
            },
            (True, False, False),
        ),  # d
    ],
)
def test_reference_ast_worked_examples(pred: dict, flags: tuple) -> None:
    v = ref_ast(pred, GT)
    assert (v.order, v.structure, v.ast) == flags


def test_mode_in_tags_and_table(callnavi_data) -> None:  # type: ignore[no-untyped-def]
    b = CallNavi(callnavi_data, {"domains": "hr", "mode": "reference"})
    assert b.opts.mode == "reference"
    r = EpisodeResult(
        benchmark="callnavi",
        episode_id="q/routing",
        repeat=0,
        scores={"routing": 1.0},
        tags={"task": "routing", "difficulty": "easy", "question": "q", "mode": "reference"},
    )
    t = callnavi_tables([r])[0]
    assert "reference mode" in t.title and "Scored in reference mode" in (t.note or "")
    old = r.model_copy(update={"tags": {k: v for k, v in r.tags.items() if k != "mode"}})
    assert "paper mode" in callnavi_tables([old])[0].title
    assert "mixed" in callnavi_tables([r, old])[0].title


def test_reference_mode_refuses_yaml(callnavi_data) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match="mode=reference"):
        CallNavi(callnavi_data, {"mode": "reference", "format": "yaml"})


def test_empty_dict_in_the_ground_truth_is_a_wildcard_in_reference() -> None:  # notes B5.1 j (ban010)
    gt = {"API": ["addHolder"], "parameters": [{"accountID": "1", "holderDetails": {}}]}
    v = ref_ast({"API": ["addHolder"], "parameters": [{"accountID": "1", "holderDetails": {"name": "A"}}]}, gt)
    assert (v.order, v.structure, v.ast) == (True, True, True)
    v = ref_ast({"API": ["addHolder"], "parameters": [{"accountID": "1"}]}, gt)  # the key must still be there
    assert (v.order, v.structure, v.ast) == (True, False, False)
