"""Teacher-forced next-token distributions from any engine, and how two of them are compared.

A ``Scorer`` is one loaded model that, given token ids and where the reply starts, gives the distribution predicting
each reply token, chunk by chunk: llama.cpp gives full logit rows (``rig.engines.llamacpp_logits``, wrapped here by
``LlamaCppScorer``), vLLM gives the top-k log-probabilities of ``prompt_logprobs`` plus the log-probability of the
token actually there (``rig.engines.vllm_logits``). ``compare`` turns a pair of chunks into per-token KL divergence,
top-1 agreement and the log-probabilities of the reference's token.

With two full rows the KL divergence is exact. When either side is top-k only, the tokens whose log-probability is
known on both sides are kept and every other token is merged into one "rest" bucket; the KL divergence between the
two coarse distributions is a LOWER BOUND on the true KL divergence (merging outcomes never increases it: the
log-sum inequality / data-processing inequality), equal to it when the known set is the whole vocabulary. Top-1
agreement stays exact (both most likely tokens are known), and so do the target's log-probabilities.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from rig.engines.llamacpp_logits import LogitsError

if TYPE_CHECKING:
    from rig.engines.base import Engine
    from rig.records import ChatRequest
    from rig.registry import ModelSpec

# The variant's rest-bucket mass is taken as at least this. vLLM's log-probabilities of the converted Gemma sum to 1
# only within about 5e-5 (measured: full-vocabulary rows summing to 1.000046), so a remainder computed from top-k
# entries is uncertain at that level and a smaller (or negative) one carries no information; raising q can only
# lower the term p log(p/q), so the result stays a lower bound.
REST_FLOOR = 1e-4


@dataclass(frozen=True)
class TopK:
    """The known part of one next-token distribution: the k most likely tokens in rank order, then the target token
    when it ranks below them; log-probabilities of the full distribution (float64)."""

    ids: np.ndarray
    logprobs: np.ndarray
    k: int

    def logprob(self, token: int) -> float:
        hit = np.flatnonzero(self.ids == token)
        return float(self.logprobs[hit[0]]) if hit.size else float("nan")


# A chunk of reply positions: full logit rows, shape (n, n_vocab), or one TopK per position.
Rows = np.ndarray | Sequence[TopK]


__all__ = ["LogitsError", "Rows", "Scorer", "TopK", "coarse_kld", "compare", "compare_one", "truncate"]


class Scorer(Protocol):
    """One model loaded for teacher-forced scoring (prefill only)."""

    engine: str  # "llamacpp", "vllm"
    full_vocabulary: bool  # False: top-k rows, so every KL divergence against it is a lower bound
    top_k: int | None  # k of a top-k scorer

    def tokenizer_digest(self) -> str:
        """The vocabulary's token texts and BOS id hashed the same way on every engine: equal digests, equal ids."""
        ...

    def replay_engine(self, spec: ModelSpec) -> Engine:
        """The engine whose chat template and tool-call parsing the reference run used, sharing this loaded model."""
        ...

    def prompt_tokens(self, engine: Engine, request: ChatRequest) -> list[int]: ...

    def reply_tokens(self, text: str) -> list[int]: ...

    def piece(self, token: int) -> bytes: ...

    def prefetch(self, items: Sequence[tuple[list[int], int]]) -> None:
        """Announce the ``(tokens, first)`` sequences the next ``rows`` calls ask for (one call per item), so an
        engine that batches can score them together; rows of earlier items not asked for are dropped."""
        ...

    def rows(self, tokens: list[int], first: int) -> Iterator[tuple[int, Rows]]:
        """Distributions predicting ``tokens[first:]`` as ``(index of the first predicted token, rows)`` chunks."""
        ...

    def close(self) -> None: ...


_SPACE_MARK = "\u2581".encode()  # SentencePiece's word-start mark, which detokenises to a space


def vocab_digest(n_vocab: int, bos: int | None, texts: Iterable[bytes]) -> str:
    """The one tokenizer digest: vocabulary size, BOS id and every token's text with SentencePiece's space mark read
    as the space it stands for. The embedded GGUF stores its 30 whitespace-run tokens as spaces where the converted
    Hugging Face tokenizer writes the mark (ids 138-167: "  " against "\u2581\u2581"); with that read alike, a GGUF
    and its converted folder digest the same, and any other difference in any entry still tells them apart."""
    h = hashlib.sha256()
    h.update(f"{n_vocab} {bos}".encode())
    for t in texts:
        h.update(t.replace(_SPACE_MARK, b" "))
        h.update(b"\0")
    return h.hexdigest()[:16]


def log_softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def _rest(lp: np.ndarray) -> float:
    """1 - the mass of the known tokens, from their log-probabilities (0 where rounding took it past 1)."""
    if lp.size == 0:
        return 1.0
    m = float(lp.max())
    total = m + float(np.log(np.exp(lp - m).sum()))
    return float(-np.expm1(min(total, 0.0)))


def coarse_kld(lp_ref: np.ndarray, lp_var: np.ndarray) -> float:
    """KL(ref || var) between two distributions coarse-grained to the given tokens plus one bucket for all others:
    a lower bound on the full KL divergence, equal to it when the tokens are the whole vocabulary."""
    kld = float(np.dot(np.exp(lp_ref), lp_ref - lp_var))
    p, q = _rest(lp_ref), max(REST_FLOOR, _rest(lp_var))
    if p > 0:
        kld += p * (np.log(p) - np.log(q))
    return max(0.0, kld)  # >= 0 in exact arithmetic


_scratch = threading.local()


def _buffer(name: str, n: int, dtype: type = np.float64) -> np.ndarray:
    """A reusable vocabulary-sized array per thread: a fresh 2 MB array per row costs its page faults every time,
    more than the arithmetic."""
    buf = getattr(_scratch, name, None)
    if buf is None or buf.shape[0] != n:
        buf = np.empty(n, dtype=dtype)
        setattr(_scratch, name, buf)
    return buf


class _Full:
    """One full logit row's softmax pieces in float64, computed once: exp(row - max) and its sum, the log-sum-exp,
    and the most likely tokens (all of them when tied). ``exp`` lives in the scratch buffer ``slot`` until the next
    row of that slot."""

    __slots__ = ("exp", "lse", "row", "sum", "tops")

    def __init__(self, row: np.ndarray, slot: str) -> None:
        self.row = row
        m = row.max()
        self.exp = np.subtract(row, m, out=_buffer(slot, row.shape[0]), dtype=np.float64)
        np.exp(self.exp, out=self.exp)
        self.sum = float(self.exp.sum())
        self.lse = float(m) + float(np.log(self.sum))
        tied = np.equal(row, m, out=_buffer("tied", row.shape[0], np.bool_))
        self.tops = {int(t) for t in np.flatnonzero(tied)}

    def logprob(self, ids: np.ndarray | int) -> np.ndarray:
        return np.asarray(self.row[ids], dtype=np.float64) - self.lse

    def kld_to(self, other: _Full) -> float:
        """KL(self || other) = sum p (log p - log q) = sum p (r - v) - lse_r + lse_v: one exp per row (none over p);
        rows equal bit for bit give exactly 0 (r - v is 0, the two lse are the same numbers)."""
        diff = np.subtract(self.row, other.row, out=_buffer("diff", self.row.shape[0]), dtype=np.float64)
        return float(np.dot(self.exp, diff)) / self.sum - self.lse + other.lse


def _side(row: np.ndarray | TopK, slot: str) -> _Full | TopK:
    return row if isinstance(row, TopK) else _Full(row, slot)


def _tops(side: _Full | TopK) -> set[int]:
    """The most likely tokens, all of them when tied: bf16 logits tie often, and which of the tied ones an engine
    ranks first (vLLM's top-k) or an argmax returns (lowest id) is an accident of the implementation."""
    if isinstance(side, _Full):
        return side.tops
    head = side.logprobs[: side.k]
    return {int(t) for t in side.ids[: side.k][head == head.max()]}


def _at(side: _Full | TopK, ids: np.ndarray) -> np.ndarray:
    if isinstance(side, _Full):
        return side.logprob(ids)
    where = {int(t): i for i, t in enumerate(side.ids)}
    return side.logprobs[[where[int(t)] for t in ids]]


def _target(side: _Full | TopK, target: int) -> float:
    return float(side.logprob(target)) if isinstance(side, _Full) else side.logprob(target)


def compare_one(ref: np.ndarray | TopK, var: np.ndarray | TopK, target: int) -> tuple[float, bool, float, float]:
    """KL(ref || var) (exact for two full rows, else the coarse-grained lower bound), whether the top-1 tokens agree
    (a most likely token in common, ties included), and each side's log-probability of the target."""
    return compare_variants(ref, [var], target)[0]


def compare_variants(
    ref: np.ndarray | TopK, variants: Sequence[np.ndarray | TopK], target: int
) -> list[tuple[float, bool, float, float]]:
    """``compare_one`` of one reference row against each variant's row of the same position, the reference's
    softmax computed once for all of them."""
    r = _side(ref, "ref")
    tops_r, lr = _tops(r), _target(r, target)
    out = []
    for var in variants:
        v = _side(var, "var")
        if isinstance(r, _Full) and isinstance(v, _Full):
            kld = r.kld_to(v)
        else:
            known = [x.ids for x in (r, v) if isinstance(x, TopK)]
            ids = np.intersect1d(known[0], known[1]) if len(known) == 2 else known[0]
            kld = coarse_kld(_at(r, ids), _at(v, ids))
        out.append((kld, bool(tops_r & _tops(v)), lr, _target(v, target)))
    return out


def compare(ref: Rows, var: Rows, targets: list[int]) -> list[tuple[float, bool, float, float]]:
    """Per position of a chunk: KL divergence, top-1 agreement, log-probs of the target (see ``compare_one``)."""
    return [compare_one(r, v, t) for r, v, t in zip(ref, var, targets, strict=True)]


def truncate(row: np.ndarray, k: int, target: int) -> TopK:
    """A full logit row cut to what a top-k engine reports: the k most likely tokens and the target."""
    lp = log_softmax(row)
    order = np.argsort(-lp, kind="stable")[:k]
    ids = order if target in order else np.append(order, target)
    return TopK(ids=ids.astype(np.int64), logprobs=lp[ids], k=len(order))


class LlamaCppScorer:
    """The llama.cpp ``LogitScorer`` (full vocabulary) behind the ``Scorer`` interface."""

    engine = "llamacpp"
    full_vocabulary = True
    top_k = None

    def __init__(self, weights: str, n_ctx: int, *, n_threads: int | None = None, chunk: int = 64) -> None:
        from rig.engines.llamacpp_logits import LogitScorer

        self.weights = weights
        self.inner = LogitScorer(weights, n_ctx, n_threads=n_threads, chunk=chunk)

    def tokenizer_digest(self) -> str:
        import llama_cpp

        llm = self.inner.llm
        vocab = llm._model.vocab
        n = self.inner.n_vocab
        return vocab_digest(n, llm.token_bos(), (llama_cpp.llama_vocab_get_text(vocab, t) or b"" for t in range(n)))

    def replay_engine(self, spec: ModelSpec) -> Engine:
        from rig.engines.llamacpp import LlamaCppEngine

        eng = LlamaCppEngine(spec, self.weights)
        eng.attach(self.inner.llm)
        return eng

    def prompt_tokens(self, engine: Engine, request: ChatRequest) -> list[int]:
        prompt, has_bos, _ = engine.render(request)  # type: ignore[attr-defined]
        return self.inner.tokenize(prompt, add_bos=not has_bos, special=True)

    def reply_tokens(self, text: str) -> list[int]:
        return self.inner.tokenize(text, add_bos=False, special=False)

    def piece(self, token: int) -> bytes:
        return self.inner.piece(token)

    def prefetch(self, items: Sequence[tuple[list[int], int]]) -> None:
        return None  # llama.cpp decodes one sequence at a time, reusing the shared prefix (LogitScorer.rows)

    def rows(self, tokens: list[int], first: int) -> Iterator[tuple[int, Rows]]:
        yield from self.inner.rows(tokens, first)

    def close(self) -> None:
        self.inner.close()
