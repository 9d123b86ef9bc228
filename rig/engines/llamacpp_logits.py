"""Teacher-forced logits from llama.cpp: a prompt and a given reply are prefilled (no generation) and only the
positions that predict reply tokens ask for logits.

llama-cpp-python's ``logits_all`` keeps context x vocabulary floats (Gemma: 262,144 per position); here the batch's
per-token logits flags are set for the reply positions alone, and those are decoded in small chunks so at most
``chunk`` rows are held at a time. Consecutive sequences sharing a prefix (one CallNavi domain's API list) reuse the
KV cache up to the first position that needs logits.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np


class LogitsError(RuntimeError):
    """A model that cannot be scored (load failure, a sequence longer than the context)."""


class LogitScorer:
    """One GGUF loaded for prefill-only scoring on the CPU (or all layers on ``gpu``)."""

    def __init__(
        self, weights: str, n_ctx: int, *, n_threads: int | None = None, chunk: int = 16, gpu: int | None = None
    ) -> None:
        import llama_cpp
        from llama_cpp import Llama

        from rig.engines.llamacpp import physical_cores, route_native_logs

        route_native_logs()
        self.weights = weights
        self.chunk = max(1, chunk)
        self.n_ctx = n_ctx
        kwargs: dict[str, Any] = {"n_gpu_layers": 0}
        if gpu is not None:
            kwargs = {"n_gpu_layers": -1, "split_mode": llama_cpp.LLAMA_SPLIT_MODE_NONE, "main_gpu": gpu}
        try:
            self.llm = Llama(
                model_path=weights,
                n_ctx=n_ctx,
                n_batch=512,
                n_ubatch=512,
                logits_all=False,
                n_threads=n_threads or physical_cores(),
                verbose=False,
                **kwargs,
            )
        except (ValueError, RuntimeError) as e:
            raise LogitsError(f"llama.cpp could not load {weights}: {e}") from None
        self.n_vocab = int(self.llm.n_vocab())
        self._ctx = self.llm._ctx.ctx
        self._batch = llama_cpp.llama_batch_init(max(512, self.chunk), 0, 1)
        self._cached: list[int] = []  # tokens whose KV entries are in the cache, from position 0

    def close(self) -> None:
        import llama_cpp

        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.llm.close()

    def tokenizer_digest(self) -> str:
        """A hash of every vocabulary entry's text and the special token ids: equal digests, equal tokenizers."""
        import llama_cpp

        vocab = self.llm._model.vocab
        h = hashlib.sha256()
        h.update(f"{self.n_vocab} {self.llm.token_bos()} {self.llm.token_eos()}".encode())
        for t in range(self.n_vocab):
            h.update(llama_cpp.llama_vocab_get_text(vocab, t) or b"")
            h.update(b"\0")
        return h.hexdigest()[:16]

    def tokenize(self, text: str, *, add_bos: bool, special: bool) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=add_bos, special=special))

    def piece(self, token: int) -> bytes:
        """The bytes a token detokenises to (pieces longer than llama-cpp-python's 32-byte buffer included)."""
        import llama_cpp

        size = 64
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, size, 0, False)
        if n < 0:
            size = -n
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, size, 0, False)
        return buf.raw[:n]

    def _decode(self, tokens: list[int], start: int, logits: bool) -> None:
        import llama_cpp

        b = self._batch
        b.n_tokens = len(tokens)
        for i, t in enumerate(tokens):
            b.token[i] = t
            b.pos[i] = start + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = logits
        rc = llama_cpp.llama_decode(self._ctx, b)
        if rc != 0:
            self._cached = []
            raise LogitsError(f"llama_decode failed (code {rc}) on {self.weights}")

    def rows(self, tokens: list[int], first: int) -> Iterator[tuple[int, np.ndarray]]:
        """Logit rows (float32, shape (k, n_vocab)) predicting ``tokens[first:]``, chunk by chunk, as
        ``(index of the first predicted token, rows)``; a row is only valid until the next chunk is asked for."""
        import llama_cpp

        if not 0 < first < len(tokens):
            raise LogitsError(f"nothing to score: reply starts at {first} of {len(tokens)} tokens")
        if len(tokens) > self.n_ctx:
            raise LogitsError(f"sequence of {len(tokens)} tokens exceeds the context of {self.n_ctx}")
        common = 0
        for a, b in zip(self._cached, tokens, strict=False):
            if a != b:
                break
            common += 1
        keep = min(common, first - 1)  # the position before the reply must be evaluated to give its logits
        mem = llama_cpp.llama_get_memory(self._ctx)
        if not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
            llama_cpp.llama_memory_clear(mem, True)  # a cache that cannot drop a tail (sliding window): restart
            keep = 0
        self._cached = tokens[:keep]
        pos = keep
        while pos < first - 1:
            n = min(512, first - 1 - pos)
            self._decode(tokens[pos : pos + n], pos, False)
            pos += n
        self._cached = tokens[:pos]
        last = len(tokens) - 1  # the final token predicts nothing we score
        while pos < last:
            n = min(self.chunk, last - pos)
            self._decode(tokens[pos : pos + n], pos, True)
            self._cached = tokens[: pos + n]
            ptr = llama_cpp.llama_get_logits(self._ctx)
            yield pos + 1, np.ctypeslib.as_array(ptr, shape=(n, self.n_vocab))
            pos += n


def log_softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def compare_rows(ref: np.ndarray, var: np.ndarray, targets: list[int]) -> list[tuple[float, bool, float, float]]:
    """Per row: KL(ref || var) over the full vocabulary in float64, whether the top-1 tokens agree, and the
    log-probability each gives to the target (the reference's chosen token)."""
    out = []
    for r, v, t in zip(ref, var, targets, strict=True):
        lr, lv = log_softmax(r), log_softmax(v)
        kld = float(np.dot(np.exp(lr), lr - lv))
        out.append((kld, bool(int(np.argmax(r)) == int(np.argmax(v))), float(lr[t]), float(lv[t])))
    return out
