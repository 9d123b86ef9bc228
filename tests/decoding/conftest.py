"""Real grammar engines as acceptance oracles.

* llama.cpp: its own grammar sampler (``llama_sampler_init_grammar``) stepped token by token over the
  embedded Gemma vocabulary (loaded ``vocab_only``; no inference), so a GBNF string is judged exactly as
  llama.cpp judges it while sampling. NULL from init means llama.cpp could not parse the grammar.
* llguidance: ``LLMatcher`` over a byte-level toy tokenizer, for both the Lark output and the GBNF output
  (through llguidance's GBNF importer, which is what vLLM's guidance backend and outlines use).
* xgrammar: vLLM's default structured-output backend, which receives rig's GBNF for every schema constraint;
  a ``GrammarMatcher`` stepped byte token by byte token, then the stop token, as vLLM steps it while decoding.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rig.decoding.accept import GuidanceAcceptor, LlamaAcceptor, XGrammarAcceptor

CALLNAVI = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "callnavi"


class LlamaMatcher:
    """rig's llama.cpp acceptor, judged on GBNF text (a text the vocabulary cannot spell back fails the test)."""

    def __init__(self, model_path: str) -> None:
        self.acceptor = LlamaAcceptor(model_path)

    def loads(self, gbnf: str) -> bool:
        return self.acceptor.loads(gbnf)

    def accepts(self, gbnf: str, text: str) -> bool:
        verdict = self.acceptor.accepts_gbnf(gbnf, text)
        assert verdict is not None, "tokenizer does not round-trip the text"
        return verdict

    def close(self) -> None:
        self.acceptor.close()


class GuidanceMatcher:
    def __init__(self) -> None:
        self.acceptor = GuidanceAcceptor()

    def compile(self, fmt: str, grammar: str) -> str:
        return self.acceptor.compile(fmt, grammar)

    def accepts(self, fmt: str, grammar: str, text: str) -> bool:
        return self.acceptor.accepts_grammar(fmt, grammar, text)


class XGrammarMatcher:
    def __init__(self) -> None:
        self.acceptor = XGrammarAcceptor()

    def accepts(self, gbnf: str, text: str) -> bool:
        return self.acceptor.accepts_gbnf(gbnf, text)


@pytest.fixture(scope="session")
def llama_matcher(embedded_weights: str) -> Iterator[LlamaMatcher]:
    m = LlamaMatcher(embedded_weights)
    yield m
    m.close()


@pytest.fixture(scope="session")
def guidance() -> GuidanceMatcher:
    pytest.importorskip("llguidance")
    return GuidanceMatcher()


@pytest.fixture(scope="session")
def xgrammar_matcher() -> XGrammarMatcher:
    pytest.importorskip("xgrammar")
    return XGrammarMatcher()


Verdicts = Callable[[str, str, str], dict[str, bool]]


@pytest.fixture(scope="session")
def engines(request: pytest.FixtureRequest) -> Verdicts:
    """verdicts(gbnf, lark, text) -> {engine: accepted} for every engine installed (at least one)."""
    found: dict[str, Any] = {}
    for name in ("llama_matcher", "guidance", "xgrammar_matcher"):
        with contextlib.suppress(pytest.skip.Exception):
            found[name] = request.getfixturevalue(name)
    if not found:
        pytest.skip("no grammar engine installed (llama-cpp-python + embedded model, llguidance or xgrammar)")

    def verdicts(gbnf: str, lark: str, text: str) -> dict[str, bool]:
        out: dict[str, bool] = {}
        if "llama_matcher" in found:
            out["llama.cpp gbnf"] = found["llama_matcher"].accepts(gbnf, text)
        if "guidance" in found:
            out["llguidance gbnf"] = found["guidance"].accepts("gbnf", gbnf, text)
            out["llguidance lark"] = found["guidance"].accepts("lark", lark, text)
        if "xgrammar_matcher" in found:
            out["xgrammar gbnf"] = found["xgrammar_matcher"].accepts(gbnf, text)
        return out

    return verdicts


def callnavi_apis(domain: str) -> list[dict]:
    path = CALLNAVI / "APIs" / f"{domain}.json"
    if not path.is_file():
        pytest.skip("CallNavi data not found beside the repository (../shared/data/callnavi)")
    return json.loads(path.read_text())["api_ports"]


def callnavi_schemas(domain: str) -> list[dict]:
    path = CALLNAVI / "APISchema" / f"{domain}.json"
    if not path.is_file():
        pytest.skip("CallNavi data not found beside the repository (../shared/data/callnavi)")
    return json.loads(path.read_text())
