"""thinking: strip — a grammar admits one think block, then the constrained answer (judged by llama.cpp itself)."""

import pytest

from rig.decoding import to_gbnf
from rig.decoding.constraint import Constraint
from rig.engines.thinking import allow_thinking_gbnf, strip_thinking


def test_strip_thinking() -> None:
    assert strip_thinking('<think>plan: call A</think>\n{"a": 1}') == '{"a": 1}'
    assert strip_thinking('{"a": 1}') == '{"a": 1}'
    assert strip_thinking("dangling</think> answer") == "answer"


def test_think_block_then_constrained_answer(embedded_weights: str) -> None:
    from tests.decoding.conftest import LlamaMatcher

    m = LlamaMatcher(embedded_weights)
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    g = allow_thinking_gbnf(to_gbnf(Constraint(kind="json_schema", schema_=schema)))
    assert m.loads(g)
    assert m.accepts(g, '{"ok": true}')
    assert m.accepts(g, '<think>The user wants a yes. So ok is true.</think>\n{"ok": true}')
    assert not m.accepts(g, '<think>never closed {"ok": true}')
    assert not m.accepts(g, '<think>a</think><think>b</think>{"ok": true}')  # one block only
    assert not m.accepts(g, '<think>a</think>{"ok": "yes"}')  # the answer is still constrained


def test_grammar_without_root_refused() -> None:
    with pytest.raises(ValueError):
        allow_thinking_gbnf('answer ::= "x"')
