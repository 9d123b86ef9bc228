"""Teacher-forced logits from llama.cpp: a prompt and a given reply are prefilled (no generation) and only the
positions that predict reply tokens ask for logits.

llama-cpp-python's ``logits_all`` keeps context x vocabulary floats (Gemma: 262,144 per position); here the batch's
per-token logits flags are set for the reply positions alone, and those are decoded in small chunks so at most
``chunk`` rows are held at a time.

Sequences sharing a prefix (one CallNavi domain's API list, an agent's earlier turns) reuse the KV cache: scored in
the order ``prefix_order`` gives, each sequence prefills only what it does not share with the one before. llama.cpp's
CPU kernels do not give a token the same numbers in every batch layout (a token's logits move by up to ~1 when it is
among the last ``n % 4`` rows of its batch, which the repacked quantized kernels compute apart from the 4-row groups),
so reuse must not change which group a token falls in: a prompt is prefilled in batches that end at multiples of 512
positions or at the reply, and only whole ``block``-position blocks that the previous sequence evaluated as inner
rows are kept, so a batch after the kept prefix starts at a multiple of ``block`` (a multiple of the group size).
Every position is then computed as a fresh prefill computes it, so rows do not depend on which sequence came before
(tests/engines/test_llamacpp_logits.py checks this bit for bit). Batches of 512, not of ``block``: every decode
ends in barriers of llama.cpp's threads, and on a host shared with other jobs a waiting thread is descheduled, so a
1,027-token prompt in 32-row batches took 2.6x as long as in 512-row ones at a load average of ~4 (3% longer on an
idle host).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic import BaseModel


class LogitsError(RuntimeError):
    """A model that cannot be scored (load failure, a sequence longer than the context)."""


class ScorerStats(BaseModel):
    """What a scorer evaluated: positions prefilled (prompt and reply) and prompt positions taken from the cache."""

    sequences: int = 0
    evaluated: int = 0
    reused: int = 0
    decodes: int = 0


class LogitScorer:
    """One GGUF loaded for prefill-only scoring on the CPU (or all layers on ``gpu``)."""

    def __init__(
        self,
        weights: str,
        n_ctx: int,
        *,
        n_threads: int | None = None,
        chunk: int = 16,
        gpu: int | None = None,
        block: int = 32,
    ) -> None:
        import llama_cpp
        from llama_cpp import Llama

        from rig.engines.llamacpp import physical_cores, route_native_logs

        route_native_logs()
        self.weights = weights
        self.chunk = max(1, chunk)
        # The unit of KV reuse: small enough that little of a shared prefix is lost to alignment, a multiple of the
        # kernels' row groups so a batch starting at it groups rows as a fresh prefill does.
        self.block = min(max(1, block), _N_BATCH)
        self.n_ctx = n_ctx
        kwargs: dict[str, Any] = {"n_gpu_layers": 0}
        if gpu is not None:
            kwargs = {"n_gpu_layers": -1, "split_mode": llama_cpp.LLAMA_SPLIT_MODE_NONE, "main_gpu": gpu}
        try:
            self.llm = Llama(
                model_path=weights,
                n_ctx=n_ctx,
                n_batch=_N_BATCH,
                n_ubatch=_N_BATCH,
                logits_all=False,
                n_threads=n_threads or physical_cores(),
                # A sliding-window cache (Gemma 3) of window size cannot drop a tail and keep what precedes it, so
                # every sequence would be prefilled from position 0; the full-size cache can (llama.cpp's default
                # today, named so that a changed default does not silently turn reuse off).
                swa_full=True,
                verbose=False,
                **kwargs,
            )
        except (ValueError, RuntimeError) as e:
            raise LogitsError(f"llama.cpp could not load {weights}: {e}") from None
        self.n_vocab = int(self.llm.n_vocab())
        self._ctx = self.llm._ctx.ctx
        self._batch = llama_cpp.llama_batch_init(max(_N_BATCH, self.chunk), 0, 1)
        self._cached: list[int] = []  # tokens whose KV entries are in the cache, from position 0
        self._whole = 0  # the cached positions below this were evaluated in whole aligned blocks
        self.stats = ScorerStats()

    def close(self) -> None:
        import llama_cpp

        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.llm.close()

    def reset(self) -> None:
        """Forget the cached prefix: the next sequence is prefilled from position 0."""
        import llama_cpp

        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)
        self._cached, self._whole = [], 0

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
        self.stats.decodes += 1
        self.stats.evaluated += len(tokens)
        if rc != 0:
            self._cached, self._whole = [], 0
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
        # Keep whole blocks only, and only those the previous sequence evaluated whole (not its last partial block
        # or reply): what is kept is then what a fresh prefill of this sequence would compute. The position before
        # the reply is always evaluated, to give its logits.
        keep = min(common, first - 1, self._whole) // self.block * self.block
        mem = llama_cpp.llama_get_memory(self._ctx)
        if not llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1):
            llama_cpp.llama_memory_clear(mem, True)  # a cache that cannot drop a tail: restart
            keep = 0
        self._cached, self._whole = tokens[:keep], keep
        self.stats.sequences += 1
        self.stats.reused += keep
        pos = keep
        while pos < first - 1:
            end = min((pos // _N_BATCH + 1) * _N_BATCH, first - 1)
            self._decode(tokens[pos:end], pos, False)
            pos = end
            self._cached = tokens[:pos]
        self._whole = (first - 1) // self.block * self.block
        last = len(tokens) - 1  # the final token predicts nothing we score
        while pos < last:
            n = min(self.chunk, last - pos)
            self._decode(tokens[pos : pos + n], pos, True)
            self._cached = tokens[: pos + n]
            ptr = llama_cpp.llama_get_logits(self._ctx)
            yield pos + 1, np.ctypeslib.as_array(ptr, shape=(n, self.n_vocab))
            pos += n


_N_BATCH = 512


def prefix_order(sequences: list[list[int]]) -> list[int]:
    """Indices of ``sequences`` in lexicographic token order: a depth-first walk of their prefix tree, so with one
    cached sequence every shared prefix is prefilled once (the order that prefills the fewest positions)."""
    return sorted(range(len(sequences)), key=lambda i: sequences[i])
