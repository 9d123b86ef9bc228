"""CallNavi `-O mode=reference`: one test per rule where the public judge scripts read an answer differently from
paper mode, and both modes scored in every run (the main one's keys plain), as the report shows them. Ground truths
are hand-made in the upstream shape (the notes' ban042 example, B5.1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from rig.benchmarks.base import DataError, RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.benchmarks.callnavi.reference import ref_ast, ref_routing_match, ref_wash
from rig.benchmarks.callnavi.scoring import score_output
from rig.benchmarks.callnavi.tables import T4_COLUMNS, callnavi_tables
from rig.execution.runner import plan, run_items
from rig.records import ChatRequest, Episode, EpisodeResult, Generation, Sampling
from rig.render.report import table_md
from rig.runfolder.store import Store
from rig.runformat import read_results
from tests.fakes import FakeEngine

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


# -- both modes in every run: the main mode's keys plain, each mode's under `paper:` / `reference:` ---------------


def _run(tmp_path: Path, options: dict, reply: Callable[[Episode], str]) -> list[EpisodeResult]:
    """A real run of the embedded sample through the runner into the store; `reply` answers each episode."""
    b = CallNavi(None, options)
    eps = b.episodes()
    by_prompt = {e.messages[-1].content: reply(e) for e in eps}
    store = Store(tmp_path / "r.sqlite")
    engine = FakeEngine(lambda req: by_prompt[req.messages[-1].content])
    asyncio.run(run_items(plan([(b, eps)], 1, order="given"), engine, store, RunContext(sampling=Sampling())))
    store.close()
    return read_results(tmp_path / "r.sqlite")


def _read_differently(e: Episode) -> str:
    """map001 routing in a ```json fence (paper 1, reference 0); map002 routing with a space inside the API name
    (paper 0, reference 1); map003 params in a ```JSON fence (paper 1, reference 0); everything else the truth."""
    gt, q = e.ground_truth, e.tags["question"]
    if e.tags["task"] == "routing":
        if q == "map001":
            return f"```json\n{json.dumps(gt['API'])}\n```"
        if q == "map002":
            return json.dumps([a[:3] + " " + a[3:] for a in gt["API"]])
        return json.dumps(gt["API"])
    return f"```JSON\n{json.dumps(gt)}\n```" if q == "map003" else json.dumps(gt)


def _by_id(results: list[EpisodeResult]) -> dict[str, EpisodeResult]:
    return {r.episode_id: r for r in results}


@pytest.mark.parametrize("main", ["paper", "reference"])
def test_a_run_stores_both_modes_and_the_main_ones_plain(tmp_path: Path, main: str) -> None:
    rs = _by_id(_run(tmp_path, {"mode": main}, _read_differently))
    for eid, paper, ref in (("map001/routing", 1.0, 0.0), ("map002/routing", 0.0, 1.0), ("map004/routing", 1.0, 1.0)):
        s = rs[eid].scores
        assert (s["paper:routing"], s["reference:routing"]) == (paper, ref), eid
        assert s["routing"] == s[f"{main}:routing"]  # Table 4, the headline and compare read the main mode
    s = rs["map003/params"].scores
    assert (s["paper:syntax"], s["paper:ast"], s["reference:syntax"], s["reference:ast"]) == (1.0, 1.0, 0.0, 0.0)
    assert s["ast"] == s[f"{main}:ast"] and CallNavi.headline(rs["map003/params"]) == s[f"{main}:ast"]
    assert all(r.tags["mode"] == main for r in rs.values())
    # the parsed value and the failure reason are the main mode's
    assert (rs["map001/routing"].error is None) == (main == "paper")


def test_tables_show_each_mode_main_first_and_count_the_episodes_that_differ(tmp_path: Path) -> None:
    results = _run(tmp_path, {"mode": "reference"}, _read_differently)
    tables = callnavi_tables(results, "m")
    main, other, differ = tables[0], tables[1], tables[2]
    assert main.title.endswith("reference mode (main)") and other.title.endswith("paper mode")
    n_routing = sum(r.tags["task"] == "routing" for r in results)
    col = T4_COLUMNS.index("Routing All")
    assert main.rows[0][col] == other.rows[0][col] == (n_routing - 1) / n_routing  # one lost in each mode
    syntax = T4_COLUMNS.index("Syntax Validity")
    assert (main.rows[0][syntax], other.rows[0][syntax]) == ((n_routing - 1) / n_routing, 1.0)
    assert differ.title == "CallNavi: where the two modes differ"
    rows = {row[1]: row for row in differ.rows}
    # metric: episodes, paper mean, reference mean, differ, paper higher, reference higher
    assert rows["Routing"][2:] == [n_routing, (n_routing - 1) / n_routing, (n_routing - 1) / n_routing, 2, 1, 1]
    assert rows["Syntax Validity"][5:] == rows["AST"][5:] == [1, 1, 0]
    assert rows["Structural Accuracy"][5:] == [1, 1, 0]
    assert "json-tagged code fence" in differ.note and "space inside an API name" in differ.note


def test_an_engine_failure_scores_zero_in_both_modes() -> None:
    class Failing(FakeEngine):
        async def chat(self, request: ChatRequest) -> Generation:  # an engine's recorded failure, not a crash
            return Generation(request_hash=request.digest(), text="", error="server: 500")

    b = CallNavi(None, {"task": "params"})
    ep = b.episodes()[0]
    r = asyncio.run(b.run_episode(ep, Failing(lambda _r: ""), RunContext(sampling=Sampling()), 0))
    assert r.status == "failed" and r.error_category == "engine_error"
    assert r.scores["ast"] == r.scores["paper:ast"] == r.scores["reference:ast"] == 0.0


def test_yaml_answers_have_no_reference_scores_and_the_table_says_not_measured(tmp_path: Path) -> None:
    results = _run(
        tmp_path,
        {"format": "yaml"},
        lambda e: yaml.safe_dump(e.ground_truth["API"] if e.tags["task"] == "routing" else e.ground_truth),
    )
    assert all(r.scores["paper:ast" if r.tags["task"] == "params" else "paper:routing"] == 1.0 for r in results)
    assert not any(k.startswith("reference:") for r in results for k in r.scores)
    tables = CallNavi.tables(results, CallNavi.Options(format="yaml"), "m")
    assert tables[0].title.endswith("paper mode (main)")
    ref, differ = tables[1], tables[2]
    assert ref.title.endswith("reference mode") and ref.rows == [["m"] + [None] * (len(T4_COLUMNS) - 1)]
    assert ref.note.startswith("Not measured: the judge scripts read JSON answers")
    assert differ.rows == [] and differ.note.startswith("Not measured: the judge scripts read JSON answers")
    md = table_md(ref)
    assert "0.000" not in md and "1.000" not in md


def test_results_stored_before_both_modes_report_as_before_saying_so(tmp_path: Path) -> None:
    new = _run(tmp_path, {}, _read_differently)
    old = [r.model_copy(update={"scores": {k: v for k, v in r.scores.items() if ":" not in k}}) for r in new]
    before, after = callnavi_tables(old, "m"), callnavi_tables(new, "m")
    assert before[0].rows == after[0].rows  # the main mode's numbers are unchanged
    assert before[0].title == "CallNavi (layout of the paper's Table 4), paper mode"
    assert "Only this mode was scored: these results were stored before rig scored both modes" in before[0].note
    assert not any("reference mode" in t.title or "differ" in t.title for t in before)
    assert [t.title for t in before[1:]] == [t.title for t in after[3:]]


def test_a_run_resumed_across_the_change_leaves_its_older_episodes_out_of_the_other_mode(tmp_path: Path) -> None:
    new = _run(tmp_path, {}, _read_differently)
    old_ids = {"map001/routing", "map002/routing"}  # the two routing replies the modes read differently
    mixed = [
        r.model_copy(update={"scores": {k: v for k, v in r.scores.items() if ":" not in k}})
        if r.episode_id in old_ids
        else r
        for r in new
    ]
    main, ref, differ = callnavi_tables(mixed, "m")[:3]
    assert main.rows == callnavi_tables(new, "m")[0].rows
    assert ref.title.endswith("reference mode") and "2 episode(s) stored before rig scored both modes" in ref.note
    assert ref.rows[0][T4_COLUMNS.index("Routing All")] == 1.0  # over the routing episodes that have both
    rows = {row[1]: row for row in differ.rows}
    n_routing = sum(r.tags["task"] == "routing" for r in new)
    assert rows["Routing"][2:] == [n_routing - 2, 1.0, 1.0, 0, 0, 0]


@pytest.mark.parametrize("mode", ["paper", "reference"])
def test_a_wrong_answer_that_parsed_is_read_and_an_unreadable_one_is_not(mode: str) -> None:
    b = CallNavi(None, {"task": "routing", "mode": mode})
    ep = b.episodes()[0]
    wrong = ep.ground_truth["API"] + ["getWeatherForecast"]
    replies = {"wrong": json.dumps(wrong), "unreadable": '["getWeatherForecast"'}
    for what, text in replies.items():
        r = asyncio.run(b.run_episode(ep, FakeEngine(lambda _r, t=text: t), RunContext(sampling=Sampling()), 0))
        assert r.scores["routing"] == 0.0
        # the reference judge compares normalised routing text and parses nothing: any text is read
        want = ("ok", "routing") if what == "wrong" or mode == "reference" else ("parse_error", "parse")
        assert (r.generations[0].parse_status, r.error_category) == want, (what, r.error)
