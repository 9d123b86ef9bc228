"""thinking: strip — a grammar admits one think block, then the constrained answer (judged by llama.cpp itself)."""

import importlib.util
from collections.abc import Iterator

import pytest

from rig.decoding import to_gbnf
from rig.decoding.constraint import Constraint
from rig.engines.thinking import allow_thinking_gbnf, strip_thinking
from tests.decoding.conftest import LlamaMatcher


def test_strip_thinking() -> None:
    assert strip_thinking('<think>plan: call A</think>\n{"a": 1}') == '{"a": 1}'
    assert strip_thinking('{"a": 1}') == '{"a": 1}'
    assert strip_thinking("dangling</think> answer") == "answer"


@pytest.fixture(scope="module")
def llama(embedded_weights: str) -> Iterator[LlamaMatcher]:
    m = LlamaMatcher(embedded_weights)
    yield m
    m.close()


def test_think_block_then_constrained_answer(llama: LlamaMatcher) -> None:
    m = llama
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


def test_the_think_block_is_unbounded_and_the_same_language_in_llama_cpp_and_xgrammar(llama: LlamaMatcher) -> None:
    """No length bound (max_tokens is the bound): llama.cpp drops a bound past 2,000 repetitions, and xgrammar masks
    slowly inside a long one. A 5,000-character block passes, and the rest of the language is the same in both."""
    from tests.decoding.conftest import XGrammarMatcher

    g = allow_thinking_gbnf(to_gbnf(Constraint(kind="json_schema", schema_={"type": "boolean"})))
    texts = {
        "true": True,
        f"<think>{'x' * 5000}</think>true": True,
        "<think>a < b, so</think>\nfalse": True,
        "<think>a</think>": False,
        "<think>a</think><think>b</think>true": False,
        "<think>a</think>yes": False,
    }
    matchers = [("llama.cpp", llama.accepts)]
    if importlib.util.find_spec("xgrammar") is not None:
        matchers.append(("xgrammar", XGrammarMatcher().accepts))
    for name, accepts in matchers:
        assert {t: accepts(g, t) for t in texts} == texts, name


def test_grammar_without_root_refused() -> None:
    with pytest.raises(ValueError):
        allow_thinking_gbnf('answer ::= "x"')
