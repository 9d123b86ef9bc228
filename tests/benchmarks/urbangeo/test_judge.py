"""UrbanGeoEval judge and answer scoring: the strict verdict parser (good, malformed, out of range), the verdict
constraint, rubric point allocations, and the program scorers on the paper's worked examples (appendix E)."""

from __future__ import annotations

import re

import pytest

from rig.benchmarks.urbangeo import judge as J
from rig.benchmarks.urbangeo import scoring as S


@pytest.mark.parametrize(
    "text,reason,answer",
    [
        ("The reasoning is sound.\nreason:[[12]], answer:[[9.42]]", 12.0, 9.42),
        ("REASON: [[ 15 ]] ,  Answer:[[10]]", 15.0, 10.0),  # case and spaces aside
        ("reason:[[3]], answer:[[1]], total:[[4]]", 3.0, 1.0),  # the paper's form with a consistent total
        ("reason:[[0]], answer:[[0]]", 0.0, 0.0),
        ("first reason:[[5]], answer:[[5]] ... again reason:[[5]], answer:[[5]]", 5.0, 5.0),  # repeated, agreeing
    ],
)
def test_verdict_good(text: str, reason: float, answer: float) -> None:
    v = J.parse_verdict(text, 15)
    assert v.status == "ok" and v.reason == reason and v.answer == answer


@pytest.mark.parametrize(
    "text,status",
    [
        ("Reason: [[12]] **Answer:** [[0]] **Total:** [[12]]", "malformed"),  # the paper's figures' markup: not ours
        ("reason:[[twelve]], answer:[[1]]", "malformed"),
        ("reason:[[-1]], answer:[[1]]", "malformed"),
        ("reason:[[12/15]], answer:[[1]]", "malformed"),
        ("I would give it 12 for reasoning and 9 for the answer.", "missing"),
        ("", "missing"),
        ("reason:[[16]], answer:[[1]]", "out_of_range"),  # reasoning max 15 for a foundational task
        ("reason:[[10]], answer:[[10.5]]", "out_of_range"),
        ("reason:[[3]], answer:[[1]] or maybe reason:[[4]], answer:[[1]]", "ambiguous"),
        ("reason:[[3]], answer:[[1]], total:[[5]]", "inconsistent_total"),
    ],
)
def test_verdict_rejected(text: str, status: str) -> None:
    v = J.parse_verdict(text, 15)
    assert v.status == status and v.reason is None and v.answer is None and not v.ok


def test_verdict_range_depends_on_the_task() -> None:
    assert J.parse_verdict("reason:[[18]], answer:[[2]]", J.REASON_MAX["PN"]).ok
    assert J.parse_verdict("reason:[[18]], answer:[[2]]", J.REASON_MAX["DS"]).status == "out_of_range"


@pytest.mark.parametrize("rmax", [15, 20])
def test_verdict_regex_language_equals_the_parser(rmax: int) -> None:
    """Every string the constraint admits parses; the ones outside range are refused by both."""
    rx = re.compile(J.verdict_regex(rmax))
    for r in ("0", "7", "9.5", "10", "14.25", "15", "15.0", "19.99", "20", "20.00", "21", "25", "15.5", "100"):
        for a in ("0", "3.33", "10", "10.0", "10.5", "11"):
            text = f"reason:[[{r}]], answer:[[{a}]]"
            assert bool(rx.fullmatch(text)) == J.parse_verdict(text, rmax).ok, text


def test_verdict_regex_translates_to_a_grammar() -> None:
    from rig.decoding import to_gbnf
    from rig.decoding.constraint import Constraint

    g = to_gbnf(Constraint(kind="regex", pattern=J.verdict_regex(20)))
    assert "root" in g


def test_rubric_points_are_the_papers() -> None:
    for task, (items, _answer) in J.RUBRICS.items():
        assert sum(p for _, p, _ in items) == J.REASON_MAX[task], task
        assert J.REASON_MAX[task] + J.ANSWER_MAX == (25 if task in ("DS", "DR", "RE") else 30)


def test_judge_prompt_carries_question_response_reference_and_format() -> None:
    msgs = J.judge_messages("NV", "Q-TEXT", "R-TEXT", "REF-TEXT", verdict_only=False)
    body = msgs[-1].content
    for part in ("Q-TEXT", "R-TEXT", "REF-TEXT", "reason:[[R]], answer:[[A]]", "0 to 20", "Network (5)"):
        assert part in body


def test_unknown_judge_is_a_config_error() -> None:
    with pytest.raises(J.JudgeConfigError, match="no-such-model"):
        J.Judge("no-such-model", 0.6, 64, "none")
    with pytest.raises(J.JudgeConfigError, match="judge_decode"):
        J.Judge(None, 0.6, 64, "grammar")


# ---- program scorers on the paper's worked examples ------------------------------------------------------------------


def test_distance_penalty_figure_33() -> None:
    score, read = S.score_distance("The direct distance ... is approximately 13.43 kilometers.", 3.34)
    assert score == 0.0 and read["km"] == 13.43
    assert S.score_distance("2.84 km", 3.34)[0] == 9.5
    assert S.score_distance("3340 m", 3.34)[0] == 10.0
    assert S.score_distance(None, 3.34)[0] == 0.0


def test_direction_penalty_figure_10() -> None:
    # Figure 34's reply: 108.3 deg, East-Southeast; truth 109.74. Figure 10's formula gives 10 - 1.44 x 0.25.
    text = (
        "The bearing from the British Museum to the Tower of London is 108.3° from true north, which "
        "corresponds to the East-Southeast (ESE) direction."
    )
    score, read = S.score_direction(text, 109.74)
    assert score == pytest.approx(9.64) and read["consistent"]
    # A named direction that contradicts the answer's own bearing costs 2 points.
    assert S.score_direction("Bearing: 120 degrees, Cardinal direction: East", 120.0)[0] == 8.0
    assert S.score_direction("Bearing: 120 degrees, Cardinal direction: Southeast", 120.0)[0] == 10.0
    assert S.score_direction("Bearing: 1 degrees, Cardinal direction: North", 359.0)[0] == 9.5  # wraps
    assert S.score_direction("no idea", 90.0)[0] == 0.0


def test_relation_exact_match() -> None:
    labels = ["Intersecting", "Parallel", "Disconnected"]
    figure_35 = (
        "The slopes of the segments ... are not equal, indicating that the roads are not parallel. ... the "
        "most likely spatial relationship is Disconnected."
    )
    assert S.parse_relation(figure_35, labels) == "Disconnected"
    assert S.parse_relation("Passes through the area", ["Pass through", "Touch", "Lie outside"]) == "Pass through"
    assert S.parse_relation("Overlapping.", ["Overlapping", "Adjacent", "Separate"]) == "Overlapping"
    assert S.score_exact("Disconnected", "Intersecting") == 0.0 and S.score_exact("Touch", "Touch") == 10.0


def test_planning_hamming_figure_38() -> None:
    names = ["The Northall", "Trafalgar Square", "London Bridge", "London Eye", "Big Ben"]
    truth = ["The Northall", "Trafalgar Square", "Big Ben", "London Eye", "London Bridge"]
    reply = (
        "The optimal visiting order is: The Northall -> Trafalgar Square -> London Bridge -> London Eye -> "
        "Big Ben, with a total distance of approximately 6.97 kilometers."
    )
    score, read = S.score_order(reply, names, truth)
    assert score == 6.0 and read["misplaced"] == 2  # the paper's judge gave 6/10 too
    assert S.score_order("->".join(truth), names, truth)[0] == 10.0
    assert S.score_order("Big Ben", names, truth)[0] == 0.0  # 5 misplaced: floored at 0


def test_prediction_and_recommendation_candidates() -> None:
    cands = [
        "Jing'an Kerry Centre",
        "Shanghai Disneyland",
        "HBC Cinema",
        "Shanghai Pudong International Airport",
        "Shanghai Peace Park",
    ]
    assert (
        S.parse_candidate(
            "the most likely final destination is D. Shanghai Pudong International Airport (31.1493, 121.8149).", cands
        )
        == cands[3]
    )
    assert S.parse_candidate("D", cands) == cands[3]
    assert S.parse_candidate("Shanghai Disneyland or HBC Cinema", cands) is None  # two named: no single answer


def test_letter_reading() -> None:
    opts = ["Kiasma", "Ateneum", "Oodi", "Amos Rex"]
    assert S.parse_letter("B", "ABCD", opts) == "B"
    assert S.parse_letter(" (c) ", "ABCD", opts) is None  # lowercase is not an option letter
    assert S.parse_letter("C) Oodi", "ABCD", opts) == "C"
    assert S.parse_letter("The answer is D.", "ABCD", opts) == "D"
    assert S.parse_letter("A good guess would be Oodi", "ABCD", opts) == "C"  # not "A"; the option text decides
    assert S.parse_letter("Kiasma or Oodi", "ABCD", opts) is None
    assert S.parse_letter("E", "ABCD", opts) is None


def test_sections() -> None:
    s = S.sections("<reason>a</reason>\n<answer>2 km</answer>")
    assert (s.reason, s.answer, s.status) == ("a", "2 km", "ok")
    assert S.sections("<reason>a</reason><answer>2 k").status == "unclosed"
    assert S.sections("just text").status == "missing"
