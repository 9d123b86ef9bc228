"""Outlines as a portable constraint path for in-process llama.cpp, and a check of the vocabulary it sees.

Outlines 1.3.3 builds two different token vocabularies for a ``llama_cpp.Llama``:

* ``outlines.models.llamacpp.LlamaCppTokenizer`` (used by the ``outlines_core`` JSON/regex backend) asks
  ``llama_token_to_piece`` for each piece into a 32-byte buffer and skips negative returns, which is how
  llama.cpp reports a buffer that is too small; it decodes pieces with ``errors="replace"`` into a
  ``str -> id`` dict, so byte tokens that are not whole UTF-8 characters all become U+FFFD and overwrite
  each other.
* ``llguidance.llamacpp.lltokenizer_from_vocab`` (used by Outlines' ``llguidance`` backend) reads raw bytes
  into a 16 KiB buffer.

``audit_vocabulary`` measures both against llama.cpp's own pieces instead of assuming either is right.
``OutlinesConstraints`` serves rig's grammars through Outlines' ``llguidance`` backend (the only Outlines
backend with context-free grammars, which YAML needs) and refuses a model whose llguidance vocabulary does
not match llama.cpp's.
"""

from __future__ import annotations

import ctypes
import json
import time
import warnings
from typing import Any

from pydantic import BaseModel, Field

# Bytes that never occur in UTF-8 text: a token made of them cannot be part of any JSON/YAML output.
_NOT_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])
_TEXT_ASCII = frozenset([0x09, 0x0A, 0x0D, *range(0x20, 0x7F)])

# Documents in the shapes rig constrains (an answer, a tool-call envelope), ASCII and not; written as
# compact JSON, spaced JSON and rig's block YAML when the audit runs.
SAMPLE_VALUES: tuple[Any, ...] = (
    {"API": ["getWeather", "getRoute"], "parameters": [{"city": "Helsinki", "days": 3, "units": None}]},
    {
        "name": "plan_route",
        "arguments": {
            "origin": "Kamppi",
            "destination": "Pasila",
            "mode": "walk",
            "max_km": 2.5,
            "avoid": [],
            "night": False,
        },
    },
    {"name": "find_place", "arguments": {"query": "Töölönlahti", "near": "Malmö – Åbo", "alt": "東京駅"}},
)


class OutlinesUnavailable(RuntimeError):
    """Outlines (or llguidance) is not installed, or cannot serve this model correctly."""


class VocabAudit(BaseModel):
    """What Outlines' llama.cpp tokenizers see, compared with llama.cpp's own pieces for every token id."""

    model: str
    n_vocab: int  # llama.cpp
    outlines_entries: int  # keys in Outlines' LlamaCppTokenizer.vocabulary (the outlines_core backend's view)
    outlines_missing: int  # token ids absent from that vocabulary (= dropped + collided)
    dropped_over_buffer: int  # absent because the piece is longer than Outlines' 32-byte buffer
    dropped_max_bytes: int  # longest such piece
    collided: int  # absent because another id decoded to the same string and overwrote it
    collided_same_bytes: int  # ... and the surviving id has the same bytes (text still spellable, choice narrowed)
    collided_lossy: int  # ... and no surviving id has these bytes (e.g. byte tokens 0x80-0xFF under U+FFFD)
    collision_groups: int  # decoded strings that two or more ids map onto
    replacement_pieces: int  # ids whose piece is not valid UTF-8 on its own (decoded to U+FFFD)
    misencoded_kept: int  # ids kept, but under a string whose UTF-8 bytes differ from the piece
    control_as_text: int  # control tokens kept as ordinary text (outlines_core may spell them inside strings)
    affected_ascii: int  # missing or misencoded ids whose piece is printable ASCII / whitespace
    affected_examples: list[str] = Field(default_factory=list)  # a few affected pieces, repr of the bytes
    sample_tokens: int  # tokens llama.cpp uses to spell the sample JSON/YAML documents
    sample_affected_ascii: int  # of those, in ASCII-only documents, missing or misencoded in Outlines' vocab
    sample_affected_non_ascii: int  # of those, in documents with non-ASCII strings
    sample_affected: list[str] = Field(default_factory=list)  # "id piece -> id Outlines keeps for that string"
    llguidance_tokens: int  # vocabulary size of the tokenizer Outlines' llguidance backend builds
    llguidance_mismatches: int  # ids whose llguidance bytes differ from llama.cpp's piece
    llguidance_mismatches_utf8: int  # of those, pieces that could occur in UTF-8 text
    llguidance_mismatch_examples: list[str] = Field(default_factory=list)
    eos_outlines: int | None = None
    eos_llguidance: list[int] = Field(default_factory=list)
    seconds: dict[str, float] = Field(default_factory=dict)  # time to build each tokenizer and to compare

    @property
    def outlines_tokenizer_ok(self) -> bool:
        """Outlines' own llama.cpp vocabulary (the outlines_core path) is byte-exact."""
        return self.outlines_missing == 0 and self.misencoded_kept == 0 and self.control_as_text == 0

    @property
    def llguidance_tokenizer_ok(self) -> bool:
        """The llguidance vocabulary Outlines builds is byte-exact for every piece UTF-8 text can contain."""
        return self.llguidance_tokens == self.n_vocab and self.llguidance_mismatches_utf8 == 0

    def summary(self) -> dict[str, Any]:
        return {
            "outlines_tokenizer_ok": self.outlines_tokenizer_ok,
            "llguidance_tokenizer_ok": self.llguidance_tokenizer_ok,
            **self.model_dump(exclude={"affected_examples", "llguidance_mismatch_examples"}),
        }


def require_outlines() -> None:
    """Raise OutlinesUnavailable naming the pip extra when outlines or llguidance is missing."""
    import importlib.util

    missing = [m for m in ("outlines", "llguidance") if importlib.util.find_spec(m) is None]
    if missing:
        raise OutlinesUnavailable(
            f"the outlines constraint backend needs {', '.join(missing)} (pip install 'rig[outlines]')"
        )


def _pieces(llm: Any) -> list[bytes]:
    """llama.cpp's own piece for every id (special tokens rendered, as both Outlines tokenizers ask)."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    size = 1024
    buf = ctypes.create_string_buffer(size)
    out = []
    for i in range(llm.n_vocab()):
        n = llama_cpp.llama_token_to_piece(vocab, i, buf, size, 0, True)
        if n < 0:  # llama.cpp returns minus the length it needs
            buf = ctypes.create_string_buffer(-n)
            size = -n
            n = llama_cpp.llama_token_to_piece(vocab, i, buf, size, 0, True)
        out.append(buf.raw[:n])
    return out


def _sample_texts() -> list[tuple[str, bool]]:
    from rig.decoding.yaml_gbnf import yaml_dump

    texts = []
    for v in SAMPLE_VALUES:
        for t in (
            json.dumps(v, ensure_ascii=False),
            json.dumps(v, ensure_ascii=False, separators=(",", ":")),
            yaml_dump(v),
        ):
            texts.append((t, t.isascii()))
    return texts


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _tokenizers(llm: Any, outlines_model: Any, llg_tokenizer: Any, seconds: dict[str, float]) -> tuple[Any, Any]:
    """Outlines' model and llguidance's tokenizer of ``llm``, each built when not given (its seconds recorded)."""
    import llama_cpp

    t = time.perf_counter()
    if outlines_model is None:
        import outlines

        outlines_model = outlines.from_llamacpp(llm, chat_mode=False)
        seconds["outlines_tokenizer"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    if llg_tokenizer is None:
        import llguidance.llamacpp

        with warnings.catch_warnings():  # llguidance asks llama-cpp-python for a deprecated name once per token
            warnings.filterwarnings("ignore", "llama_token_get_attr is deprecated", DeprecationWarning)
            llg_tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(llama_cpp.llama_model_get_vocab(llm.model))
        seconds["llguidance_tokenizer"] = round(time.perf_counter() - t, 2)
    return outlines_model, llg_tokenizer


def _sample_hits(llm: Any, affected: set[int]) -> tuple[set[int], set[int], set[int]]:
    """The token ids of the sample documents, and which affected ones appear in ASCII and in other documents."""
    sample_ids: set[int] = set()
    hit_ascii: set[int] = set()
    hit_other: set[int] = set()
    for text, is_ascii in _sample_texts():
        ids = llm.tokenize(text.encode(), add_bos=False, special=False)
        assert llm.detokenize(ids) == text.encode(), "llama.cpp does not round-trip a sample document"
        sample_ids.update(ids)
        (hit_ascii if is_ascii else hit_other).update(i for i in ids if i in affected)
    return sample_ids, hit_ascii, hit_other


def audit_vocabulary(llm: Any, *, outlines_model: Any = None, llg_tokenizer: Any = None) -> VocabAudit:
    """Compare Outlines' and llguidance's views of ``llm``'s vocabulary with llama.cpp's, id by id.

    ``outlines_model`` (``outlines.from_llamacpp(llm)``) and ``llg_tokenizer`` are built when not given;
    each costs a pass over the vocabulary (seconds for a 262k vocabulary).
    """
    import llama_cpp

    require_outlines()
    seconds: dict[str, float] = {}
    outlines_model, llg_tokenizer = _tokenizers(llm, outlines_model, llg_tokenizer, seconds)
    t = time.perf_counter()
    pieces = _pieces(llm)
    n = len(pieces)
    vocab_c = llama_cpp.llama_model_get_vocab(llm.model)
    o_tok = outlines_model.tokenizer
    o_vocab: dict[str, int] = o_tok.vocabulary
    kept = {i: s for s, i in o_vocab.items()}
    by_string: dict[str, list[int]] = {}
    for i, p in enumerate(pieces):
        if len(p) <= 32:
            by_string.setdefault(p.decode("utf-8", errors="replace"), []).append(i)
    dropped = [i for i in range(n) if i not in kept and len(pieces[i]) > 32]
    collided = [i for i in range(n) if i not in kept and len(pieces[i]) <= 32]
    survivor = {i: o_vocab.get(pieces[i].decode("utf-8", errors="replace")) for i in collided}
    same_bytes = [i for i in collided if (j := survivor[i]) is not None and pieces[j] == pieces[i]]
    misencoded = [i for i, s in kept.items() if s.encode("utf-8") != pieces[i]]
    control = [i for i in kept if llama_cpp.llama_vocab_get_attr(vocab_c, i) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL]
    affected = sorted(set(dropped) | set(collided) | set(misencoded))
    affected_set = set(affected)
    ascii_affected = [i for i in affected if pieces[i] and set(pieces[i]) <= _TEXT_ASCII]

    sample_ids, hit_ascii, hit_other = _sample_hits(llm, affected_set)
    llg_n = llg_tokenizer.vocab_size
    llg_bad = [i for i in range(min(n, llg_n)) if llg_tokenizer.decode_bytes([i]) != pieces[i]]
    llg_bad_utf8 = [i for i in llg_bad if not set(pieces[i]) & _NOT_UTF8]
    seconds["compare"] = round(time.perf_counter() - t, 2)

    name = llm.metadata.get("general.name") or "unknown"
    return VocabAudit(
        model=name,
        n_vocab=n,
        outlines_entries=len(o_vocab),
        outlines_missing=len(dropped) + len(collided),
        dropped_over_buffer=len(dropped),
        dropped_max_bytes=max((len(pieces[i]) for i in dropped), default=0),
        collided=len(collided),
        collided_same_bytes=len(same_bytes),
        collided_lossy=len(collided) - len(same_bytes),
        collision_groups=sum(1 for ids in by_string.values() if len(ids) > 1),
        replacement_pieces=sum(1 for p in pieces if not _is_utf8(p)),
        misencoded_kept=len(misencoded),
        control_as_text=len(control),
        affected_ascii=len(ascii_affected),
        affected_examples=[repr(pieces[i]) for i in (dropped[:2] + collided[:2] + misencoded[:2])],
        sample_tokens=len(sample_ids),
        sample_affected_ascii=len(hit_ascii),
        sample_affected_non_ascii=len(hit_other),
        sample_affected=[
            f"{i} {pieces[i]!r} -> {o_vocab.get(pieces[i].decode('utf-8', errors='replace'))}"
            for i in sorted(hit_ascii | hit_other)[:12]
        ],
        llguidance_tokens=llg_n,
        llguidance_mismatches=len(llg_bad),
        llguidance_mismatches_utf8=len(llg_bad_utf8),
        llguidance_mismatch_examples=[
            f"{i}: {pieces[i]!r} -> {llg_tokenizer.decode_bytes([i])!r}" for i in llg_bad[:5]
        ],
        eos_outlines=getattr(o_tok, "eos_token_id", None),
        eos_llguidance=list(llg_tokenizer.eos_tokens),
        seconds=seconds,
    )


def check_audit(a: VocabAudit) -> None:
    """Refuse (OutlinesUnavailable) a model whose llguidance vocabulary, the one the processors use, is wrong."""
    if not a.llguidance_tokenizer_ok:
        raise OutlinesUnavailable(
            f"Outlines' llguidance vocabulary for {a.model} does not match llama.cpp's ({a.llguidance_tokens} of "
            f"{a.n_vocab} tokens, {a.llguidance_mismatches_utf8} pieces differ, e.g. "
            f"{a.llguidance_mismatch_examples[:2]}); its constraints would be wrong, use constraint_backend native"
        )


class OutlinesConstraints:
    """Outlines logits processors for one loaded ``Llama``, through Outlines' ``llguidance`` backend.

    The grammar is rig's own (``to_lark``; GBNF where a thinking prefix is added), so the language is the one
    the native path enforces; Outlines supplies the tokenizer bridge and the logits processor.
    """

    def __init__(self, llm: Any) -> None:
        require_outlines()
        import outlines
        from outlines.backends import LLGuidanceBackend

        t = time.perf_counter()
        self.model = outlines.from_llamacpp(llm, chat_mode=False)
        t_outlines = time.perf_counter() - t
        t = time.perf_counter()
        with warnings.catch_warnings():  # llguidance asks llama-cpp-python for a deprecated name once per token
            warnings.filterwarnings("ignore", "llama_token_get_attr is deprecated", DeprecationWarning)
            self.backend = LLGuidanceBackend(self.model)
        t_llg = time.perf_counter() - t
        self.audit = audit_vocabulary(llm, outlines_model=self.model, llg_tokenizer=self.backend.llg_tokenizer)
        self.audit.seconds.update(outlines_tokenizer=round(t_outlines, 2), llguidance_tokenizer=round(t_llg, 2))
        check_audit(self.audit)
        self._procs: dict[str, Any] = {}

    def processor(self, grammar: str) -> Any:
        """A reset logits processor for a Lark or GBNF grammar; raises ValueError when llguidance rejects it.

        Outlines' ``LLGuidanceLogitsProcessor`` does not check the grammar (a broken one only shows as a
        warning while decoding), so it is validated here first. Processors are cached per grammar and reset
        per request; the engine serialises requests, so one instance is never used twice at once.
        """
        proc = self._procs.get(grammar)
        if proc is None:
            import llguidance

            proc = self.backend.get_cfg_logits_processor(grammar)
            err = llguidance.LLMatcher.validate_grammar(proc.grammar, self.backend.llg_tokenizer)
            if err:
                raise ValueError(f"llguidance rejects the grammar: {err}")
            self._procs[grammar] = proc
        proc.reset()
        return proc

    @staticmethod
    def error(proc: Any, pending: int | None = None) -> str | None:
        """The matcher's error after a generation, if any: a token the grammar did not allow was generated.

        ``pending``: the last generated token, which the processor has not consumed yet (it consumes a token
        when asked for the next one).
        """
        for m in getattr(proc, "ll_matchers", []):
            if pending is not None and not m.is_error():
                m.consume_token(pending)
            if m.is_error():
                return m.get_error()
        return None
