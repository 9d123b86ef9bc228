"""rig.decoding.safe: the linear scanners of JSON objects inside prose (``object_spans``), and what the YAML loader
keeps inside quotes."""

from __future__ import annotations

import json
import time

import pytest

from rig.decoding.safe import MAX_RESCANS, object_spans


def spans(text: str) -> list[str]:
    return [text[a:b] for a, b in object_spans(text)]


def test_outermost_objects_in_prose_with_braces_inside_strings_and_escapes() -> None:
    text = 'Call {"a": "}{", "b": {"c": "\\"}"}} then {"d": 1}. Say "{" in prose.'
    assert spans(text) == ['{"a": "}{", "b": {"c": "\\"}"}}', '{"d": 1}']


def test_quotes_outside_braces_are_prose() -> None:
    assert spans('He said "go" and {"x": 1} and "stop"') == ['{"x": 1}']


def test_an_unclosed_brace_before_a_call_restarts_the_scan_after_it() -> None:
    assert spans('Use { to open. {"name": "f", "arguments": {}}') == ['{"name": "f", "arguments": {}}']
    assert spans('a {"b": "open string } {"c": 1}') == ['{"c": 1}']


def test_rescans_are_bounded() -> None:
    # More unclosed braces than rescans: the later object is given up, never searched for from every brace.
    text = "{ " * (MAX_RESCANS + 1) + '{"x": 1}'
    assert spans(text) == []
    assert spans("{ " * MAX_RESCANS + '{"x": 1}') == ['{"x": 1}']


def test_time_is_linear_in_the_text() -> None:
    def cost(n: int) -> float:
        t0 = time.perf_counter()
        for text in ("{" * n, '{"' * (n // 2), "{}" * (n // 2), "\\{" * (n // 2)):
            object_spans(text)
        return time.perf_counter() - t0

    cost(1000)
    small = min(cost(10_000) for _ in range(3))
    big = min(cost(100_000) for _ in range(3))
    assert big < 30 * small + 0.05  # a quadratic scan would take about 100 times as long


@pytest.mark.parametrize("ch", ["\x85", "\x80", "\x9f", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff"])
def test_a_yaml_reply_keeps_inside_quotes_what_pyyaml_would_fold_or_refuse(ch: str) -> None:
    """rig's YAML grammars admit these raw inside a double-quoted string, as its JSON grammars do: the loader reads
    the string a JSON reply would carry (PyYAML alone refuses C1 controls and folds NEL and U+2028/9 into a space)."""
    from rig.decoding.safe import load_json, load_yaml

    text = f'a: "x{ch}y"\nb:\n  - "{ch}"\n'
    assert load_yaml(text) == ({"a": f"x{ch}y", "b": [ch]}, None)
    assert load_json(json.dumps({"a": f"x{ch}y"}, ensure_ascii=False))[0] == {"a": f"x{ch}y"}
    # outside quotes nothing is rewritten: a plain scalar with one is what PyYAML makes of it, or refused
    value, err = load_yaml(f"a: x{ch}y\n")
    assert err is not None or value != {"a": f"x\\u{ord(ch):04x}y"}
