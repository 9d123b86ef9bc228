"""Constrained over unconstrained decoding on vLLM, per structured-output backend (issue 49), end to end.

The same CallNavi parameter questions (JSON answer grammar) and RouteEval prompts (JSON tool-call grammar, its
strings bounded by the tool schema) through rig's ``VllmEngine.chat``, greedy, each prompt once unconstrained and once
under rig's grammar, interleaved, ``--runs`` passes; one loaded engine per backend (vLLM's structured-output backend
is an engine setting): ``xgrammar`` (vLLM's default, what rig sent before) and ``guidance`` (llguidance, rig's choice).
Per-token time is 1 / the decode tokens/s of each generation; per pass the median constrained over the median
unconstrained, then the median of passes.

    .venv-vllm/bin/python scripts/bench_vllm_constrained.py --hf-dir .venv-vllm/models/gemma3-270m-hf

Writes benchmarks/results/vllm_constrained.md. Ratios only; run on an idle host (the load average is recorded).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's rig, not another installed one
sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]


def requests(n: int, max_tokens: int) -> list[tuple[str, Any, Any]]:
    """(benchmark, unconstrained request, the same request under rig's JSON grammar)."""
    from rig.agents.toolmode import constraint_for, tools_prompt
    from rig.benchmarks.callnavi.benchmark import CallNavi
    from rig.benchmarks.routeeval.benchmark import RouteEval
    from rig.records import ChatRequest, Message, Sampling

    s = Sampling(max_tokens=max_tokens, temperature=0.0)
    out = []
    cn = CallNavi(None, {"task": "params"})
    for e in cn.episodes()[:n]:
        r = ChatRequest(messages=e.messages, sampling=s)
        out.append(("callnavi", r, r.model_copy(update={"constraint": cn.constraint_for(e, "json")})))
    for e in RouteEval(None).episodes()[:n]:
        msgs = [Message(role="system", content=tools_prompt(e.tools, "json")), *e.messages]
        r = ChatRequest(messages=msgs, sampling=s)
        out.append(("routeeval", r, r.model_copy(update={"constraint": constraint_for(e.tools, "json")})))
    return out


async def measure(spec: Any, weights: str, backend: str, reqs: list, runs: int) -> dict[str, Any]:  # type: ignore[type-arg]
    from rig.engines.vllm import VllmEngine

    spec = spec.model_copy(update={"engine_args": {**spec.engine_args, "constraint_backend": backend}})
    eng = VllmEngine(spec, weights)
    await eng.load()
    per_bench: dict[str, Any] = {}
    try:
        for bench in sorted({b for b, _, _ in reqs}):
            ratios, free_all, cons_all, toks = [], [], [], []
            for run in range(runs):
                free, cons = [], []
                for i, (b, plain, constrained) in enumerate(reqs):
                    if b != bench:
                        continue
                    order = [(plain, free), (constrained, cons)]
                    if (i + run) % 2:
                        order.reverse()
                    for req, sink in order:
                        g = await eng.chat(req)
                        if g.error:
                            raise SystemExit(f"{backend} {bench}: {g.error}")
                        if g.timings.decode_tps:
                            sink.append(1.0 / g.timings.decode_tps)
                            if sink is cons:
                                toks.append(g.completion_tokens or 0)
                ratios.append(statistics.median(cons) / statistics.median(free))
                free_all += free
                cons_all += cons
            per_bench[bench] = {
                "ratios": ratios,
                "free_ms": statistics.median(free_all) * 1000,
                "cons_ms": statistics.median(cons_all) * 1000,
                "tokens": statistics.median(toks) if toks else 0,
            }
    finally:
        await eng.close()
    return per_bench


def main(argv: list[str] | None = None) -> int:
    from bench_vllm import _spec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hf-dir", type=Path, required=True, help="a folder from `rig models convert ... --to hf`")
    ap.add_argument("--base", default="gemma3-270m")
    ap.add_argument("--prompts", type=int, default=6, help="per benchmark")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--backends", default="xgrammar,guidance")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "vllm_constrained.md")
    a = ap.parse_args(argv)
    a.model, a.only, a.episodes, a.block_size = None, "throughput", a.prompts, None
    spec, weights = _spec(a)
    reqs = requests(a.prompts, a.max_tokens)
    load0 = os.getloadavg()[0]
    results = {b: asyncio.run(measure(spec, weights, b, reqs, a.runs)) for b in a.backends.split(",")}
    load1 = os.getloadavg()[0]
    import vllm

    lines = [
        "# Constrained over unconstrained decoding on vLLM CPU, per structured-output backend",
        "",
        f"Written by `scripts/bench_vllm_constrained.py` ({time.strftime('%Y-%m-%d')}): vLLM {vllm.__version__}, "
        f"{a.base} converted (`--hf-dir`), {os.cpu_count()} logical CPUs; {a.prompts} CallNavi parameter questions "
        f"(JSON answer grammar) and {a.prompts} RouteEval prompts (JSON tool-call grammar), greedy, max_tokens "
        f"{a.max_tokens}, each prompt unconstrained and constrained, interleaved, {a.runs} passes, one loaded engine "
        f"per backend. Load average {load0:.2f} before, {load1:.2f} after.",
        "",
        "| backend | benchmark | unconstrained ms/token | constrained ms/token | constrained tokens (median) | "
        "ratio, median (per pass) |",
        "|---|---|---|---|---|---|",
    ]
    for backend, per in results.items():
        for bench, r in per.items():
            cells = ", ".join(f"{x:.2f}" for x in r["ratios"])
            lines.append(
                f"| {backend} | {bench} | {r['free_ms']:.1f} | {r['cons_ms']:.1f} | {r['tokens']:.0f} | "
                f"**{statistics.median(r['ratios']):.2f}** ({cells}) |"
            )
    text = "\n".join(lines) + "\n"
    a.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
