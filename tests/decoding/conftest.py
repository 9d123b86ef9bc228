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
import ctypes
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CALLNAVI = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "callnavi"


class LlamaMatcher:
    def __init__(self, model_path: str) -> None:
        import llama_cpp

        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.eos = self.llm.token_eos()
        self._samplers: dict[str, Any] = {}  # grammar text -> sampler, reset between texts

    def loads(self, gbnf: str) -> bool:
        return self._sampler(gbnf) is not None

    def _sampler(self, gbnf: str) -> Any:
        if gbnf not in self._samplers:
            smpl = self.lc.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
            self._samplers[gbnf] = smpl if smpl else None
        return self._samplers[gbnf]

    def accepts(self, gbnf: str, text: str) -> bool:
        lc = self.lc
        smpl = self._sampler(gbnf)
        if smpl is None:
            raise ValueError("llama.cpp could not parse the grammar")
        lc.llama_sampler_reset(smpl)
        tokens = self.llm.tokenize(text.encode(), add_bos=False, special=False)
        assert self.llm.detokenize(tokens).decode() == text, "tokenizer does not round-trip the text"
        for t in [*tokens, self.eos]:
            # Ask the sampler to mask a one-candidate array; -inf means the grammar forbids the token.
            data = (lc.llama_token_data * 1)(lc.llama_token_data(id=t, logit=0.0, p=0.0))
            arr = lc.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
            lc.llama_sampler_apply(smpl, ctypes.byref(arr))
            if math.isinf(data[0].logit):
                return False
            if t != self.eos:
                lc.llama_sampler_accept(smpl, t)
        return True

    def close(self) -> None:
        for smpl in self._samplers.values():
            if smpl is not None:
                self.lc.llama_sampler_free(smpl)
        self._samplers.clear()
        self.llm.close()


class _ByteTokenizer:
    """256 byte tokens + EOS: every string has exactly one tokenization, so only the grammar decides."""

    eos_token_id = 256
    bos_token_id = None
    tokens = (*(bytes([i]) for i in range(256)), b"<eos>")
    special_token_ids = (256,)

    def __call__(self, s: Any) -> list[int]:
        return list(s.encode() if isinstance(s, str) else s)


class GuidanceMatcher:
    def __init__(self) -> None:
        import llguidance

        self.llg = llguidance
        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()))
        self._matchers: dict[tuple[str, str], Any] = {}

    def compile(self, fmt: str, grammar: str) -> str:
        spec = self.llg.grammar_from(fmt, grammar)
        err = self.llg.LLMatcher.validate_grammar(spec, self.tok)
        if err:
            raise ValueError(f"llguidance rejects the {fmt} grammar: {err}")
        return spec

    def accepts(self, fmt: str, grammar: str, text: str) -> bool:
        m = self._matchers.get((fmt, grammar))
        if m is None:
            m = self._matchers[(fmt, grammar)] = self.llg.LLMatcher(self.tok, self.compile(fmt, grammar), log_level=0)
            assert not m.is_error(), m.get_error()
        m.reset()
        ok = m.consume_tokens(list(text.encode())) and not m.is_error() and m.is_accepting()
        if m.is_error():  # an error state survives reset(): rebuild next time
            del self._matchers[(fmt, grammar)]
        return ok


class XGrammarMatcher:
    def __init__(self) -> None:
        import xgrammar

        self.xg = xgrammar
        # The stop token gets no text: xgrammar 0.2.9 also matches a stop token's text against the grammar, so an
        # EOS spelled "<eos>" satisfied a trailing [^ ,]+ and a reply ending in ", " passed. A real tokenizer's EOS
        # is a special token that xgrammar never matches as text; an empty one is the byte-level equivalent.
        vocab = [*_ByteTokenizer.tokens[: _ByteTokenizer.eos_token_id], b""]
        info = xgrammar.TokenizerInfo(vocab, stop_token_ids=[_ByteTokenizer.eos_token_id])
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=True)
        self._matchers: dict[str, Any] = {}

    def accepts(self, gbnf: str, text: str) -> bool:
        m = self._matchers.get(gbnf)
        if m is None:
            try:
                # The string, as vLLM passes it: with the compiler's cache on, a parsed Grammar object loses
                # non-ASCII literals (xgrammar 0.2.8 re-reads its printed form, where "é" became "\xe9").
                compiled = self.compiler.compile_grammar(gbnf)
            except Exception as e:  # xgrammar raises RuntimeError or its own parse errors
                raise ValueError(f"xgrammar rejects the grammar: {e}") from None
            m = self._matchers[gbnf] = self.xg.GrammarMatcher(compiled)
        m.reset()
        tokens = [*text.encode(), _ByteTokenizer.eos_token_id]
        return all(m.accept_token(t) for t in tokens) and m.is_terminated()


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
