"""Every reader of model text turns any reply into an answer or a scored format error, quickly (issue 18).

One fuzz test per reader (hypothesis, the "ci" profile from conftest), the replies the issue lists as regressions,
and a time bound per reply so a quadratic regex cannot return."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.readers import READERS, REGRESSIONS

_PIECES = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ":",
    ",",
    " ",
    "\n",
    "-",
    "1",
    "0" * 50,
    "9" * 400,
    "1e400",
    "NaN",
    "&a",
    "*a",
    "!!binary",
    "!!set",
    "2024-02-30",
    "```",
    "```json",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<reason>",
    "</reason>",
    "<answer>",
    "</answer>",
    "reason:[[",
    "]]",
    "answer",
    "km",
    "bearing",
    "\\ud83d",
    "\ud83d",
    "name",
    "arguments",
    '"name": "f"',
    '"x": ',
    "true",
    "null",
    "\t",
    "é",
]
REPLY = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(_PIECES), max_size=80).map("".join),
    st.tuples(st.sampled_from(_PIECES), st.integers(1, 3000)).map(lambda p: p[0] * p[1]),
)
SLOW_S = 2.0  # generous under a loaded CI machine; the slow cases took 14 to 226 s before the fix


def _read(name: str, text: str) -> None:
    t0 = time.perf_counter()
    out = READERS[name](text)  # an exception here fails the test: it would be an engine crash in a run
    assert out is None or isinstance(out, str)
    assert time.perf_counter() - t0 < SLOW_S, f"{name} took {time.perf_counter() - t0:.2f}s on {text[:60]!r}"


@pytest.mark.parametrize("name", sorted(READERS))
@given(text=REPLY)
def test_reader_fuzz(name: str, text: str) -> None:
    _read(name, text)


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_regressions(name: str) -> None:
    for text in REGRESSIONS:
        _read(name, text)


def test_issue_replies_are_format_errors_with_reasons() -> None:
    from rig.benchmarks.callnavi.parse import parse_answer
    from rig.benchmarks.routeeval.scoring import check_call
    from rig.benchmarks.urbangeo.scoring import score_direction, score_distance
    from rig.decoding.safe import load_json, load_yaml

    assert load_yaml("d: 2024-02-30") == ({"d": "2024-02-30"}, None)  # a date is text, not a crash
    for text, why in [('["\\ud83d"]', "surrogate"), ("[" * 800 + "]" * 800, "deep"), ("1" * 4400, "digits")]:
        value, err = load_json(text)
        assert value is None and err is not None and why in err
    for text, why in [
        ("a: !!binary //79", "binary"),
        ("&a [*a]", "not yet complete"),
        ("[" * 600, "deep"),
        ('a: "\\ud83d\\ude00"', "surrogate"),
        (READERS_LAUGHS, "values"),
    ]:
        value, err = load_yaml(text)
        assert value is None and err is not None and why in err, (text[:30], err)
    assert parse_answer("{" * 1000, "json", dict)[1].startswith("json_error")
    cat, why, _ = check_call({"estimated_distance": 10**400, "route_type": "loop", "waypoints": []}, 10, 200)
    assert cat == "tool_calling_failure" and "not a finite number" in why
    assert score_direction("1" * 310, 45.0) == (0.0, {"bearing": None, "cardinal": None})
    assert score_distance("1" * 20000, 3.0) == (0.0, {"km": None})


READERS_LAUGHS = REGRESSIONS[5]


def test_yaml_refuses_billion_laughs_fast() -> None:
    from rig.decoding.safe import load_yaml

    t0 = time.perf_counter()
    assert load_yaml(READERS_LAUGHS)[0] is None
    assert time.perf_counter() - t0 < 1.0


def test_linear_readers_scale() -> None:
    """Ten times the input takes well under a hundred times as long (a quadratic reader would)."""
    from rig.benchmarks.callnavi.parse import strip_fences
    from rig.engines.thinking import strip_thinking

    def cost(n: int) -> float:
        t0 = time.perf_counter()
        strip_fences("```json\n" + " " * n + "x")
        strip_thinking("<think>" * n)
        return time.perf_counter() - t0

    cost(1000)
    assert cost(100_000) < 0.5
