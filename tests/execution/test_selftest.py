"""`rig selftest` through the library: gold reaches every metric's maximum and anti-gold its minimum on CallNavi
(embedded and upstream data) and UrbanGeoEval; the grammar gaps the self-test found stay closed; a constraint that
rejects a gold reply, a malformed gold and a benchmark without a gold agent are each reported, never a crash."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.decoding.accept import Acceptor, acceptors
from rig.execution.selftest import SelftestOptions, SelftestReport, run_selftest


@pytest.fixture(scope="module")
def grammar_engines(embedded_weights: str) -> Iterator[list[Acceptor]]:
    found, _missing = acceptors(embedded_weights)
    assert any(a.name == "llama.cpp" for a in found)
    yield found
    for a in found:
        close = getattr(a, "close", None)
        if close is not None:
            close()


def _all_at_bounds(report: SelftestReport) -> None:
    for b in report.benchmarks:
        assert b.status == "ran", b
        for m in b.modes:
            assert m.error is None and m.played == m.episodes > 0, (m.mode.label, m.error, m.unavailable)
            bad = [line for line in m.metrics if line.verdict not in ("ok", "cap")]
            assert not bad, (m.mode.label, bad, m.shortfalls[:5])
    assert report.ok


def test_callnavi_embedded_every_mode(grammar_engines: list[Acceptor]) -> None:
    report = run_selftest(SelftestOptions(benchmarks=["callnavi"]), grammar_engines)
    _all_at_bounds(report)
    modes = report.benchmarks[0].modes
    assert {m.mode.label for m in modes} >= {"decode=json mode=reference", "decode=yaml", "decode=none format=yaml"}
    for m in modes:
        by = {line.metric: line for line in m.metrics}
        assert by["paper:ast"].gold == 1.0 and by["paper:ast"].anti == 0.0
        assert by["paper:syntax"].anti == 1.0  # anti-gold is well formed


def test_upstream_callnavi_every_question_both_tasks_json_and_yaml(
    callnavi_data: Path, grammar_engines: list[Acceptor]
) -> None:
    """All 729 questions, both tasks, constrained JSON and YAML: every gold answer is accepted by the grammar rig
    sends (schema, llama.cpp, llguidance, xgrammar) and scores 1; before the grammar was widened about 6% of the
    params answers were refused (undeclared argument names, objects where scalars are declared, API names the
    domain's list lacks)."""
    opts = SelftestOptions(benchmarks=["callnavi"], data=callnavi_data, modes=["decode=json", "decode=yaml"])
    report = run_selftest(opts, grammar_engines)
    _all_at_bounds(report)
    assert all(m.episodes == 1458 for m in report.benchmarks[0].modes)
    notes = [n for m in report.benchmarks[0].modes for n in m.notes]
    assert any("getpassengerName" in n and "APIs/aviation.json" in n for n in notes)


def _callnavi_folder(root: Path, questions: list[dict], apis: list[dict]) -> Path:
    (root / "Questions").mkdir(parents=True)
    (root / "APIs").mkdir()
    (root / "Questions" / "bank.json").write_text(json.dumps(questions))
    (root / "APIs" / "bank.json").write_text(json.dumps({"api_ports": apis}))
    return root


API = [
    {"name": "getAccount", "parameters": {"customerID": "string"}, "description": "d"},
    {"name": "setHolder", "parameters": {"accountID": "string", "holder": {"name": "string"}}, "description": "d"},
]


def _q(qid: str, apis: list[str], params: list[dict]) -> dict:
    return {
        "id": qid,
        "question": [{"role": "user", "content": f"question {qid}"}],
        "ground_truth": {"API": apis, "parameters": params},
        "difficulty": "easy",
    }


GAPS = [  # one question per kind of gold answer the old grammar refused
    _q("undeclared_arg", ["getAccount"], [{"accountNumber": "123456"}]),
    _q("object_for_scalar", ["getAccount"], [{"customerID": {"id": "C1", "branch": 7}}]),
    _q("list_for_scalar", ["getAccount"], [{"customerID": ["C1", "C2"]}]),
    _q("nested_key_lacking", ["setHolder"], [{"accountID": "A1", "holder": {"name": "Ann", "age": 30}}]),
    _q("api_not_declared", ["getpassengerName"], [{"bookingId": "9876"}]),
]


@pytest.mark.parametrize("decode", ["json", "yaml"])
def test_callnavi_grammar_admits_every_kind_of_gold_it_refused(
    tmp_path: Path, decode: str, grammar_engines: list[Acceptor]
) -> None:
    data = _callnavi_folder(tmp_path, GAPS, API)
    report = run_selftest(
        SelftestOptions(benchmarks=["callnavi"], data=data, modes=[f"decode={decode}"]), grammar_engines
    )
    _all_at_bounds(report)
    (mode,) = [m for m in report.benchmarks[0].modes if m.mode.options.get("mode") != "reference"][:1]
    assert not [s for s in mode.shortfalls if s.cause == "constraint"]


def test_a_constraint_that_rejects_the_gold_is_named(tmp_path: Path, grammar_engines: list[Acceptor]) -> None:
    """A value past the grammar's 32-character bound (not a wildcard) cannot be written under the grammar: the
    self-test fails and says which check refused which episode; unconstrained, the same gold scores 1."""
    long = "x" * 40
    data = _callnavi_folder(tmp_path, [_q("long_value", ["getAccount"], [{"customerID": long}])], API)
    opts = SelftestOptions(benchmarks=["callnavi"], data=data, modes=["decode=json mode=paper", "decode=none"])
    report = run_selftest(opts, grammar_engines)
    assert not report.ok
    by_mode = {m.mode.label: m for m in report.benchmarks[0].modes}
    constrained = by_mode["decode=json mode=paper"]
    ast = next(line for line in constrained.metrics if line.metric == "paper:ast")
    assert ast.verdict == "short" and ast.gold == 0.0
    gold_short = [s for s in constrained.shortfalls if s.agent == "gold" and s.episode == "long_value/params"]
    assert gold_short and all(s.cause == "constraint" for s in gold_short)
    assert "schema: " in gold_short[0].why and "llama.cpp: its grammar does not accept" in gold_short[0].why
    free = by_mode["decode=none mode=paper"]
    assert all(line.verdict == "ok" for line in free.metrics)


def test_malformed_gold_is_one_episode_line_naming_file_and_field(
    tmp_path: Path, grammar_engines: list[Acceptor]
) -> None:
    broken = _q("no_truth", ["getAccount"], [{}])
    del broken["ground_truth"]
    bad_params = _q("bad_params", ["getAccount"], [])
    bad_params["ground_truth"]["parameters"] = "customerID"
    questions = [broken, bad_params, _q("fine", ["getAccount"], [{"customerID": "C1"}])]
    data = _callnavi_folder(tmp_path, questions, API)
    report = run_selftest(
        SelftestOptions(benchmarks=["callnavi"], data=data, modes=["decode=none mode=paper"]), grammar_engines
    )
    (mode,) = report.benchmarks[0].modes
    qfile = str(data / "Questions" / "bank.json")
    assert any(u.startswith("no_truth/") and qfile in u and "'no_truth'.ground_truth" in u for u in mode.unavailable)
    assert any("'bad_params'.ground_truth.parameters" in u for u in mode.unavailable)
    assert mode.played == 2 and report.ok  # the good question's two tasks ran and reached the bounds


def test_urbangeo_gold_and_the_planning_floor(helsinki_pack: Path, grammar_engines: list[Acceptor]) -> None:
    report = run_selftest(SelftestOptions(benchmarks=["urbangeo"]), grammar_engines)
    _all_at_bounds(report)
    for m in report.benchmarks[0].modes:
        by = {line.metric: line for line in m.metrics}
        assert by["total_pct"].gold == 100.0 and by["answer_program"].gold == 10.0
        # the one anti-gold floor above 0 is planning's 10 - 2 per misplaced place, named as such
        assert {s.episode.split("/")[2] for s in m.shortfalls if s.agent == "anti-gold"} <= {"PN"}
        if "correct" in by:
            assert by["correct"].gold == 1.0 and by["correct"].anti == 0.0
