"""Per-token decode overhead of grammar-constrained versus unconstrained generation (llama.cpp, embedded model).

Same CallNavi prompts, interleaved, --runs passes; reports the median ratio of seconds per generated token
(1 / decode tokens/s) constrained over unconstrained, for JSON and YAML, plus parse/validate rates.

    python scripts/bench_constrained.py --data ../shared/data/callnavi --limit 20 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.decoding import parse_output
from rig.engines import create_engine
from rig.records import ChatRequest, Sampling
from rig.registry import load_registry, resolve_weights
from rig.runs.bench import select
from rig.runs.runner import plan


async def main_async(a: argparse.Namespace) -> list[str]:
    reg = load_registry()
    spec = reg.get("gemma3-270m")
    eng = create_engine(spec, resolve_weights(spec, reg.path))
    await eng.load()
    lines = []
    for fmt in ("json", "yaml"):
        bench = CallNavi(a.data, {"format": fmt, "task": "params"})
        eps = [it.episode for it in plan([(bench, select(bench.episodes(), a.limit, 0))], 1)]
        per_tok: dict[str, list[float]] = {"none": [], fmt: []}
        ok = {"none": 0, fmt: 0}
        n = {"none": 0, fmt: 0}
        pass_ratios = []
        for _ in range(a.runs):
            start = {m: len(per_tok[m]) for m in per_tok}
            for ep in eps:
                for mode in ("none", fmt):
                    c = bench.constraint_for(ep, mode)
                    g = await eng.chat(ChatRequest(messages=ep.messages, constraint=c,
                                                   sampling=Sampling(max_tokens=a.max_tokens)))
                    if g.timings.decode_tps:
                        per_tok[mode].append(1.0 / g.timings.decode_tps)
                    c2 = c or bench.constraint_for(ep, fmt)
                    value, err = parse_output(g.text, c2)
                    n[mode] += 1
                    ok[mode] += err is None
            # One ratio per pass (both modes ran interleaved on the same prompts), then the median of passes.
            pass_ratios.append(statistics.median(per_tok[fmt][start[fmt]:]) /
                               statistics.median(per_tok["none"][start["none"]:]))
        ratio = statistics.median(pass_ratios)
        lines.append(f"| {fmt} | {statistics.median(per_tok['none']) * 1000:.1f} | "
                     f"{statistics.median(per_tok[fmt]) * 1000:.1f} | {ratio:.3f} "
                     f"({', '.join(f'{r:.3f}' for r in pass_ratios)}) | "
                     f"{ok['none']}/{n['none']} | {ok[fmt]}/{n[fmt]} |")
        print(lines[-1], flush=True)
    await eng.close()
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/constrained_overhead.md"))
    a = ap.parse_args()
    rows = asyncio.run(main_async(a))
    text = "\n".join([
        "# Constrained vs unconstrained decoding (llama.cpp, embedded gemma3-270m, CPU)", "",
        f"{a.limit} CallNavi questions (params task, seeded sample), {a.runs} interleaved passes, max_tokens "
        f"{a.max_tokens}. Per-token time = 1 / decode tokens/s of each generation; medians. Host: shared, noisy CPU; "
        "compare ratios, not absolute times.", "",
        "| format | unconstrained ms/token | constrained ms/token | ratio, median of passes (per pass) | unconstrained parse+validate | "
        "constrained parse+validate |", "|---|---|---|---|---|---|", *rows, ""])
    a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
