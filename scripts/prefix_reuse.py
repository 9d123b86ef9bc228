"""What reusing the KV prefix of consecutive prompts saves, measured on the raw engine.

rig's llama.cpp engine keeps one context for the whole run, so a prompt that starts like the one before it (a CallNavi
domain's API list, an agent's growing conversation) only evaluates its tail. This script replays the prompts of a
finished run, in the run's order, through llama-cpp-python directly (no rig code in the timed loop), twice per
repeat: once keeping the longest common prefix in the KV cache, once clearing it before each prompt. Both passes
evaluate every prompt up to its last token with one logits row, as a generation's prefill does; the passes alternate
within each repeat so a change of load hits both. Reported: tokens evaluated and the median time of each pass, and
their ratio.

    python scripts/prefix_reuse.py RUN --models models.yaml --repeats 3 --max-prompts 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any


def prompts(run: Path, models: str | None, model: str | None, limit: int | None) -> tuple[list[list[int]], str, int]:
    """The run's prompts as token ids (rig's own rendering and tokenizer), the weights file and the context size."""
    from rig.analyses.divergence.replay import replay_pairs
    from rig.engines.logits import LlamaCppScorer
    from rig.registry import load_registry, resolve_weights
    from rig.runfolder.folder import RunFolder

    cfg = RunFolder(run).manifest.config.model
    reg = load_registry(models)
    spec = reg.get(model or cfg.name)
    weights = resolve_weights(spec, reg.path)
    sc = LlamaCppScorer(weights, cfg.context_length)
    try:
        inner = sc.replay_engine(spec)
        toks = [sc.prompt_tokens(inner, p.request) for p in replay_pairs(run, inner)[0]]
    finally:
        sc.close()
    return toks[:limit] if limit else toks, weights, cfg.context_length


def prefill(llm: Any, prompts: list[list[int]], reuse: bool) -> tuple[float, int]:
    """Evaluate each prompt as a generation's prefill does; (seconds, tokens evaluated)."""
    import llama_cpp

    ctx = llm._ctx.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    llama_cpp.llama_memory_clear(mem, True)
    cached: list[int] = []
    evaluated = 0
    t0 = time.perf_counter()
    try:
        for toks in prompts:
            keep = 0
            if reuse:  # at least the last token is evaluated, for its logits
                while keep < min(len(cached), len(toks) - 1) and cached[keep] == toks[keep]:
                    keep += 1
            llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1)
            pos = keep
            while pos < len(toks):
                end = min(pos + 512, len(toks))
                batch.n_tokens = end - pos
                for i, t in enumerate(toks[pos:end]):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, pos + i, 1
                    batch.seq_id[i][0], batch.logits[i] = 0, pos + i == len(toks) - 1
                if llama_cpp.llama_decode(ctx, batch) != 0:
                    raise SystemExit("llama_decode failed")
                pos = end
            evaluated += len(toks) - keep
            cached = toks
    finally:
        llama_cpp.llama_batch_free(batch)
    return time.perf_counter() - t0, evaluated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished run folder whose prompts are replayed in order")
    ap.add_argument("--models", default=None, help="models.yaml naming the run's model (default: rig's registry)")
    ap.add_argument("--model", default=None, help="replay through another model of the same tokenizer")
    ap.add_argument("--max-prompts", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    a = ap.parse_args()

    from llama_cpp import Llama

    from rig.engines.llamacpp import physical_cores

    toks, weights, n_ctx = prompts(a.run, a.models, a.model, a.max_prompts)
    llm = Llama(model_path=weights, n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=physical_cores(), verbose=False)
    times: dict[bool, list[float]] = {True: [], False: []}
    evaluated: dict[bool, int] = {}
    for k in range(a.repeats):
        for reuse in (k % 2 == 0, k % 2 == 1):  # alternate which pass goes first
            s, n = prefill(llm, toks, reuse)
            times[reuse].append(s)
            evaluated[reuse] = n
            print(f"repeat {k + 1}: {'reuse' if reuse else 'fresh'} {s:.1f}s, {n} tokens", flush=True)
    llm.close()
    med = {r: statistics.median(v) for r, v in times.items()}
    out = {
        "run": a.run.name,
        "model": Path(weights).name,
        "prompts": len(toks),
        "prompt_tokens": sum(map(len, toks)),
        "tokens_evaluated": {"reuse": evaluated[True], "fresh": evaluated[False]},
        "seconds": {"reuse": times[True], "fresh": times[False]},
        "median_s": {"reuse": med[True], "fresh": med[False]},
        "time_ratio_reuse_over_fresh": med[True] / med[False],
        "token_ratio_reuse_over_fresh": evaluated[True] / evaluated[False],
        "repeats": a.repeats,
        "load_average_end": os.getloadavg()[0],
    }
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
