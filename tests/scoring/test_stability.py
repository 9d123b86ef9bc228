"""Stability scores: the paper's section 5.3 examples (N=5) and Score_Lev."""

from __future__ import annotations

import pytest

from rig.scoring import stability as st
from rig.scoring.stability import (
    election_stability,
    levenshtein_distance,
    levenshtein_stability,
    normalise_output,
)

# Distinct realistic answers; each has formatting variants that must be equal.
OUT = {
    "A": [
        '{"API": ["getAccountID"], "parameters": [{"customerID": "C1"}]}',
        "```json\n{'API': ['getAccountID'],\n 'parameters': [{'customerID': 'C1'}]}\n```",
        '{"api":["GETACCOUNTID"],"parameters":[{"customerid":"c1"}]}',
        '  {"API" : [ "getAccountID" ] , "parameters" : [ { "customerID" : "C1" } ] }\n',
        "{\u201cAPI\u201d: [\u201cgetAccountID\u201d], "
        "\u201cparameters\u201d: [{\u201ccustomerID\u201d: \u201cC1\u201d}]}",
    ],
    "B": ['{"API": ["getAccountBalance"], "parameters": [{"accountID": "$$$"}]}'],
    "C": ['{"API": ["getAccountID", "getAccountBalance"], "parameters": [{"customerID": "C1"}, {"accountID": "$$$"}]}'],
    "D": ['{"API": ["getAccountID"], "parameters": [{"customerID": "C2"}]}'],
    "E": ['{"API": [], "parameters": []}'],
}


def outputs(pattern: str) -> list[str]:
    """'AABBC' -> five strings; repeated letters use different formatting variants."""
    seen: dict[str, int] = {}
    result = []
    for letter in pattern:
        i = seen.get(letter, 0)
        seen[letter] = i + 1
        variants = OUT[letter]
        result.append(variants[i % len(variants)])
    return result


def test_variants_normalise_equal() -> None:
    assert len({normalise_output(v) for v in OUT["A"]}) == 1
    assert len({normalise_output(OUT[k][0]) for k in OUT}) == len(OUT)


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("AAAAA", 1.0),
        ("AABBC", 0.0),
        ("AABCD", 0.25),
        ("AAABB", 1 / 3),
        ("AAABC", 0.5),
        ("AAAAB", 0.75),
        ("ABCDE", 0.0),
    ],
)
def test_paper_election_examples(pattern: str, expected: float) -> None:
    assert election_stability(outputs(pattern)) == pytest.approx(expected)


def test_election_order_invariant_and_raw_mode() -> None:
    assert election_stability(outputs("BAAAC")) == pytest.approx(0.5)
    # Without normalisation the formatting variants are different outputs.
    assert election_stability(outputs("AAAAA"), normalise=False) == 0.0


def test_election_edge_cases() -> None:
    with pytest.raises(ValueError):
        election_stability([])
    assert election_stability(["x"]) == 1.0
    assert election_stability(["x", "y"]) == 0.0


@pytest.mark.parametrize(
    "a, b, d",
    [("", "", 0), ("abc", "", 3), ("kitten", "sitting", 3), ("flaw", "lawn", 2), ("abc", "abd", 1), ("ab", "ba", 2)],
)
def test_levenshtein_distance(a: str, b: str, d: int) -> None:
    assert levenshtein_distance(a, b) == d
    assert st._levenshtein_dp(a, b) == d
    assert st._levenshtein_dp(b, a) == d


def test_levenshtein_stability_examples() -> None:
    assert levenshtein_stability(["abc", "abd", "abc"]) == pytest.approx((2 / 3 + 1) / 2)
    # First output is the reference: differs from the all-pairs reconstruction.
    assert levenshtein_stability(["abc", "abc", "abd"]) == pytest.approx((1 + 2 / 3) / 2)
    assert levenshtein_stability(["abd", "abc", "abc"]) == pytest.approx(2 / 3)
    assert levenshtein_stability(["kitten", "sitting"], normalise=False) == pytest.approx(1 - 3 / 7)


def test_levenshtein_stability_identical_and_edges() -> None:
    assert levenshtein_stability(outputs("AAAAA")) == 1.0
    assert levenshtein_stability(["same"] * 5) == 1.0
    assert levenshtein_stability(["only"]) == 1.0
    assert levenshtein_stability(["", ""]) == 1.0
    assert levenshtein_stability(["", "abc"]) == 0.0
    with pytest.raises(ValueError):
        levenshtein_stability([])


def test_levenshtein_stability_normalises_by_default() -> None:
    assert levenshtein_stability(["ABC", " a b c\n"]) == 1.0
    assert levenshtein_stability(["ABC", " a b c\n"], normalise=False) < 1.0


def test_levenshtein_stability_compares_the_first_lev_max_chars() -> None:
    # at and under the cap: the paper's formula on whole outputs
    a, b = "a" * st.LEV_MAX_CHARS, "a" * (st.LEV_MAX_CHARS - 8) + "b" * 8
    assert levenshtein_stability([a, b]) == pytest.approx(1 - 8 / st.LEV_MAX_CHARS)
    # past it, only the first LEV_MAX_CHARS count: replies equal up to there score 1.0 whatever follows
    assert levenshtein_stability([a + "x" * 600_000, a + "y" * 10]) == 1.0
    assert levenshtein_stability([b + "x" * 600_000, a + "y" * 600_000]) == pytest.approx(1 - 8 / st.LEV_MAX_CHARS)
