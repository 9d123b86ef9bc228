"""Per-token decode overhead of grammar-constrained versus unconstrained generation (llama.cpp, embedded model).

Same CallNavi prompts, interleaved, --runs passes; reports the median ratio of seconds per generated token
(1 / decode tokens/s) constrained over unconstrained, for JSON and YAML, plus parse/validate rates. Constrained
runs twice: with the engine's default lazy grammar check (greedy: the best token is checked first) and with
the vocabulary masked at every step (``grammar_mask: full``, what llama-cpp-python's own grammar path does).
Greedy outputs of the two must be identical; the script counts any difference.

    python scripts/bench_constrained.py --data ../shared/data/callnavi --limit 20 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.decoding import parse_output
from rig.engines import create_engine
from rig.execution.bench import select
from rig.execution.runner import plan
from rig.records import ChatRequest, Sampling
from rig.registry import load_registry, resolve_weights


def _ratio_cell(ratios: list[float]) -> str:
    """The median ratio, then each pass's."""
    return f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})"


async def main_async(a: argparse.Namespace) -> list[str]:
    reg = load_registry()
    spec = reg.get(a.model)
    if a.threads:
        spec = spec.model_copy(update={"engine_args": {**spec.engine_args, "n_threads": a.threads}})
    eng = create_engine(spec, resolve_weights(spec, reg.path))
    await eng.load()
    lines = []
    for fmt in ("json", "yaml"):
        bench = CallNavi(a.data, {"format": fmt, "task": "params"})
        eps = [it.episode for it in plan([(bench, select(bench.episodes(), a.limit, 0))], 1)]
        modes = ("none", "lazy", "full")
        per_tok: dict[str, list[float]] = {m: [] for m in modes}
        ok = dict.fromkeys(modes, 0)
        n = dict.fromkeys(modes, 0)
        ratios: dict[str, list[float]] = {"lazy": [], "full": []}
        differ = 0
        for _ in range(a.runs):
            start = {m: len(per_tok[m]) for m in modes}
            for ep in eps:
                texts = {}
                for mode in modes:
                    c = bench.constraint_for(ep, "none" if mode == "none" else fmt)
                    eng.args.grammar_mask = "full" if mode == "full" else "lazy"
                    g = await eng.chat(
                        ChatRequest(messages=ep.messages, constraint=c, sampling=Sampling(max_tokens=a.max_tokens))
                    )
                    if g.timings.decode_tps:
                        per_tok[mode].append(1.0 / g.timings.decode_tps)
                    _, err = parse_output(g.text, bench.constraint_for(ep, fmt))
                    n[mode] += 1
                    ok[mode] += err is None and not g.error
                    texts[mode] = g.text
                differ += texts["lazy"] != texts["full"]
            # One ratio per pass (all modes ran interleaved on the same prompts), then the median of passes.
            base = statistics.median(per_tok["none"][start["none"] :])
            for m in ratios:
                ratios[m].append(statistics.median(per_tok[m][start[m] :]) / base)

        lines.append(
            f"| {fmt} | {statistics.median(per_tok['none']) * 1000:.1f} | "
            f"{statistics.median(per_tok['lazy']) * 1000:.1f} | {statistics.median(per_tok['full']) * 1000:.1f} | "
            f"{_ratio_cell(ratios['lazy'])} | {_ratio_cell(ratios['full'])} | "
            f"{ok['none']}/{n['none']} | {ok['lazy']}/{n['lazy']} | {ok['full']}/{n['full']} | {differ} |"
        )
        print(lines[-1], flush=True)
    await eng.close()
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--model", default="gemma3-270m", help="a llama.cpp model of models.yaml")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp decode threads (0: the engine's default)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/constrained_overhead.md"))
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    rows = asyncio.run(main_async(a))
    load1 = os.getloadavg()[0]
    text = "\n".join(
        [
            f"# Constrained vs unconstrained decoding (llama.cpp, {a.model}, CPU)",
            "",
            "Written by `scripts/bench_constrained.py`. "
            f"{a.limit} CallNavi questions (params task, seeded sample), {a.runs} interleaved passes, max_tokens "
            f"{a.max_tokens}, greedy, {a.threads or 'default'} decode threads. Per-token time = 1 / decode tokens/s of "
            "each generation; ratios are constrained over unconstrained per pass, then the median of passes. "
            "*lazy*: the engine's default grammar check (the best token first, then the 64 best, the full "
            "vocabulary only when none is allowed); *full*: the vocabulary masked at every step, as "
            "llama-cpp-python's own grammar path does. "
            f"Load average {load0:.2f} before, {load1:.2f} after ({time.strftime('%Y-%m-%d')}); compare ratios, not "
            "absolute times.",
            "",
            "| format | unconstrained ms/token | lazy ms/token | full ms/token | lazy ratio, median (per pass) | "
            "full ratio, median (per pass) | unconstrained parse+validate | lazy parse+validate | "
            "full parse+validate | lazy and full outputs differ |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
