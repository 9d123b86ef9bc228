"""Issue 4's GPU targets for the vLLM engine. UNVERIFIED: written without a GPU; run it where one is lent.

1. ``throughput``: the same CallNavi prompts (chat template applied by the rig's render), generated greedily once
   by a bare ``vllm.LLM.generate`` batch and once through the rig's vLLM engine with every request in flight.
   Target: rig >= 0.9x the bare generated tokens/s. Each side runs in its own process (a GPU holds one engine at a time), interleaved,
   ``--runs`` times; the median ratio is reported.
2. ``agents``: MobilityBench episodes (ReAct) through the rig's vLLM engine, 32 in flight vs 1 at a time. Target:
   >= 8x faster.

    python scripts/bench_vllm.py --model qwen3-8b-vllm --gpu 0 --data ../shared/data/callnavi

Writes benchmarks/results/vllm_<device>.md naming the GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _engine(model: str, gpu: int):  # type: ignore[no-untyped-def]
    from rig.engines import create_engine
    from rig.registry import load_registry, resolve_weights

    reg = load_registry()
    spec = reg.get(model)
    return spec, create_engine(spec, resolve_weights(spec, reg.path), gpu=gpu)


def _requests(data: Path, n: int, max_tokens: int) -> list:  # type: ignore[type-arg]
    from rig.benchmarks.callnavi.benchmark import CallNavi
    from rig.records import ChatRequest, Sampling

    eps = CallNavi(data, {"task": "params"}).episodes()[:n]
    return [ChatRequest(messages=e.messages, sampling=Sampling(max_tokens=max_tokens, temperature=0.0)) for e in eps]


async def _side(a: argparse.Namespace) -> dict:
    """One side of the throughput comparison, in this process: generated tokens and wall seconds (greedy, so
    both sides generate the same continuations up to batching noise)."""
    spec, eng = _engine(a.model, a.gpu)
    reqs = _requests(a.data, a.prompts, a.max_tokens)
    if a.side == "bare":
        import os

        os.environ["CUDA_VISIBLE_DEVICES"] = str(a.gpu)
        from vllm import LLM, SamplingParams

        from rig.engines.vllm import NO_SPECIAL_TOKENS

        llm = LLM(model=eng.weights, max_model_len=spec.context_length, seed=spec.sampling.seed, **spec.engine_args)
        eng.tokenizer = llm.get_tokenizer()  # the rig's own render (chat template, thinking switch), no engine
        prompts = [eng.render(r) for r in reqs]
        t0 = time.perf_counter()
        outs = llm.generate(prompts, SamplingParams(max_tokens=a.max_tokens, temperature=0.0),
                            tokenization_kwargs=NO_SPECIAL_TOKENS)  # the same token ids as the rig's engine
        wall = time.perf_counter() - t0
        return {"tokens": sum(len(o.outputs[0].token_ids) for o in outs), "wall_s": wall}
    await eng.load()
    t0 = time.perf_counter()
    gens = await asyncio.gather(*(eng.chat(r) for r in reqs))
    wall = time.perf_counter() - t0
    await eng.close()
    if any(g.error for g in gens):
        raise SystemExit(f"rig side: {sum(bool(g.error) for g in gens)} requests failed: "
                         f"{next(g.error for g in gens if g.error)}")
    return {"tokens": sum(g.completion_tokens or 0 for g in gens), "wall_s": wall}


async def _agents(a: argparse.Namespace) -> list[tuple[int, float, int]]:
    from rig.benchmarks.base import RunContext
    from rig.benchmarks.mobilitybench.benchmark import MobilityBench
    from rig.records import Sampling

    _spec, eng = _engine(a.model, a.gpu)
    await eng.load()
    bench = MobilityBench(None, {"similarity": "jaccard"})
    eps = (bench.episodes() * 3)[: a.episodes]
    bench.service()
    ctx = RunContext(sampling=Sampling(max_tokens=512, temperature=0.1), tool_mode="native")
    rows = []
    for in_flight in (1, a.episodes) * a.runs:
        sem = asyncio.Semaphore(in_flight)

        async def one(i: int, ep):  # type: ignore[no-untyped-def]
            async with sem:
                return await bench.run_episode(ep, eng, ctx, i)

        t0 = time.perf_counter()
        res = await asyncio.gather(*(one(i, e) for i, e in enumerate(eps)))
        rows.append((in_flight, time.perf_counter() - t0, sum(r.status == "scored" for r in res)))
    await eng.close()
    return rows


def _device(gpu: int) -> str:
    import pynvml

    pynvml.nvmlInit()
    name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(gpu))
    pynvml.nvmlShutdown()
    return str(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-8b-vllm")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--data", type=Path, required=True, help="upstream CallNavi folder (prompts)")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--episodes", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--side", choices=("bare", "rig"), help=argparse.SUPPRESS)  # internal: one throughput side
    a = ap.parse_args()
    from rig import offline

    offline.install()
    if a.side:
        print(json.dumps(asyncio.run(_side(a))))
        return
    base = [sys.executable, __file__, "--model", a.model, "--gpu", str(a.gpu), "--data", str(a.data), "--prompts",
            str(a.prompts), "--max-tokens", str(a.max_tokens)]
    tps: dict[str, list[float]] = {"bare": [], "rig": []}
    for _ in range(a.runs):
        for side in ("bare", "rig"):
            out = subprocess.run([*base, "--side", side], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            tps[side].append(r["tokens"] / r["wall_s"])
    ratios = [r / b for r, b in zip(tps["rig"], tps["bare"])]
    agents = asyncio.run(_agents(a))
    t1 = statistics.median(w for f, w, _ in agents if f == 1)
    tn = statistics.median(w for f, w, _ in agents if f == a.episodes)
    device = _device(a.gpu)
    lines = [f"# vLLM engine on {device}", "", f"Written by `scripts/bench_vllm.py`; model `{a.model}`.", "",
             f"Throughput, {a.prompts} CallNavi prompts, greedy, max_tokens {a.max_tokens}, {a.runs} interleaved "
             "runs, each side in its own process:", "",
             "| run | bare tokens/s | rig tokens/s | rig / bare |", "|---|---|---|---|",
             *[f"| {i + 1} | {b:.0f} | {r:.0f} | {x:.3f} |"
               for i, (b, r, x) in enumerate(zip(tps["bare"], tps["rig"], ratios))],
             "", f"Median rig / bare: **{statistics.median(ratios):.3f}x** (target >= 0.9).", "",
             f"MobilityBench agents (ReAct, native tools), {a.episodes} episodes:", "",
             "| in flight | wall s | scored |", "|---|---|---|", *[f"| {f} | {w:.1f} | {s} |" for f, w, s in agents],
             "", f"Median speed-up {a.episodes} in flight vs 1: **{t1 / tn:.2f}x** (target >= 8).", ""]
    out = ROOT / "benchmarks" / "results" / f"vllm_{device.replace(' ', '_')}.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
