"""llama.cpp's grammar sampler, applied lazily: check the model's choice first, mask the vocabulary only if needed.

llama-cpp-python puts the grammar sampler in front of the sampling chain, so every step runs the grammar over
the whole vocabulary (262k candidates for Gemma 3): that is most of the cost of constrained decoding on a CPU.
llama.cpp's own tools sample first and run the grammar over the full vocabulary only when the sampled token is
rejected. Under greedy decoding the result is the same token either way: if the highest-scoring token is
allowed, it is also the highest-scoring allowed token. This processor does that for greedy requests, in four
steps (the best token; else the 64 best; else the 4,096 best; else the whole vocabulary), and masks the full
vocabulary for sampled requests (a sampled token is only known after the processor has run). The 4,096 step is for
YAML: after a line break its grammar allows only the next key's indentation, which the model often ranks below the
64 best, and a full mask over Gemma's 262,144 tokens costs two decode steps.

Used as a llama-cpp-python logits processor: it sees every step's logits (indexed by token id) and the
sequence so far, from which it feeds the grammar the tokens generated since its last call.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

# Candidates checked, in turn, when the best token is rejected, before masking the whole vocabulary. On CallNavi's
# YAML answers (Gemma 3) the 64 best left 19 of 387 steps to a full mask, the 4,096 best 4.
TOPS = (64, 4096)


class GrammarError(ValueError):
    """llama.cpp could not parse the grammar."""


class LazyGrammar:
    def __init__(self, vocab: Any, gbnf: str, n_vocab: int, n_prompt: int, *, greedy: bool) -> None:
        import llama_cpp

        self._ll = llama_cpp
        self.smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
        if not self.smpl:
            raise GrammarError(
                f"llama.cpp could not parse the grammar (its log above says why); grammar starts: {gbnf[:200]!r}"
            )
        self.n_prompt = n_prompt
        self.greedy = greedy
        self.fed = 0
        self.steps = self.top_picks = self.full_masks = 0
        self._one: Any = (llama_cpp.llama_token_data * 1)()
        self._tops = []  # (k, its candidate array, a numpy view of it), for each k of TOPS below the vocabulary
        for k in sorted({min(t, n_vocab) for t in TOPS}):
            buf = (llama_cpp.llama_token_data * k)()
            self._tops.append((k, buf, np.ctypeslib.as_array(buf)))
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._all_np = np.ctypeslib.as_array(self._all)  # structured view: fields id, logit, p

    def _apply(self, data: Any, size: int) -> None:
        arr = self._ll.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self._ll.llama_sampler_apply(self.smpl, ctypes.byref(arr))

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        for tok in input_ids[self.n_prompt + self.fed :]:  # what was sampled since the last step
            self._ll.llama_sampler_accept(self.smpl, int(tok))
            self.fed += 1
        self.steps += 1
        if self.greedy:
            best = int(np.argmax(logits))
            self._one[0].id, self._one[0].logit, self._one[0].p = best, float(logits[best]), 0.0
            self._apply(self._one, 1)
            if np.isfinite(self._one[0].logit):
                return logits
            for k, buf, view in self._tops:
                choice = self._best_of_top(logits, k, buf, view)
                if choice is not None:
                    self.top_picks += 1
                    out = np.full_like(logits, -np.inf)
                    out[choice] = logits[choice]
                    return out
        self.full_masks += 1
        view = self._all_np
        view["id"] = np.arange(len(view), dtype=np.int32)
        view["logit"] = logits[: len(view)]
        self._apply(self._all, len(view))
        out = np.array(logits, copy=True)
        out[: len(view)][~np.isfinite(view["logit"])] = -np.inf
        return out

    def _best_of_top(self, logits: np.ndarray, k: int, buf: Any, view: np.ndarray) -> int | None:
        """The greedy choice among the allowed tokens, if one of the ``k`` highest-scoring tokens is allowed.

        The highest allowed token in the top set is the highest allowed overall, except on a tie with the set's
        boundary (a token left out may score the same and have a lower id, which greedy would pick): then None.
        """
        top = np.argpartition(logits, -k)[-k:]
        view["id"], view["logit"] = top, logits[top]
        self._apply(buf, k)
        ok = top[np.isfinite(view["logit"])]
        if not len(ok):
            return None
        m = logits[ok].max()
        if m == logits[top].min():
            return None
        return int(ok[logits[ok] == m].min())

    def close(self) -> None:
        if self.smpl:
            self._ll.llama_sampler_free(self.smpl)
            self.smpl = None
