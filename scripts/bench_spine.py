"""Spine performance: rig overhead against a bare llama-cpp-python loop, and prefix-grouped vs shuffled order.

Same 50 CallNavi questions (params task), same model and settings, interleaved runs, medians of --runs.
Writes a markdown table to benchmarks/results/spine_overhead.md.

    python scripts/bench_spine.py --data ../shared/data/callnavi --runs 3
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.execution.bench import BenchOptions, run_bench, select
from rig.execution.runner import plan
from rig.registry import load_registry, resolve_weights


def bare_loop(weights: str, prompts: list[str], n_ctx: int, max_tokens: int, n_batch: int) -> float:
    """The raw engine: one Llama, create_chat_completion per prompt, greedy, nothing else."""
    from llama_cpp import Llama

    t0 = time.perf_counter()
    llm = Llama(
        model_path=weights, n_ctx=n_ctx, n_gpu_layers=0, seed=0, verbose=False, chat_format="gemma", n_batch=n_batch
    )
    for p in prompts:
        llm.create_chat_completion([{"role": "user", "content": p}], max_tokens=max_tokens, temperature=0.0, seed=0)
    llm.close()
    return time.perf_counter() - t0


def rig_run(data: Path, limit: int, max_tokens: int, order: str, out: Path) -> float:
    t0 = time.perf_counter()
    run_bench(
        BenchOptions(
            model="gemma3-270m",
            benchmark="callnavi",
            data=data,
            limit=limit,
            options={"task": "params"},
            max_tokens=max_tokens,
            order=order,
            out=out,
        )
    )
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument(
        "--shuffled-runs",
        type=int,
        default=1,
        help="shuffled passes re-evaluate every prompt in full and are ~10x slower; 1 is usually enough",
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/spine_overhead.md"))
    a = ap.parse_args()
    reg = load_registry()
    spec = reg.get("gemma3-270m")
    weights = resolve_weights(spec, reg.path)
    bench = CallNavi(a.data, {"task": "params"})
    eps = select(bench.episodes(), a.limit, spec.sampling.seed)
    grouped_prompts = [it.episode.messages[0].content for it in plan([(bench, eps)], 1, order="grouped")]
    times: dict[str, list[float]] = {"bare": [], "rig": [], "rig_shuffled": []}
    with tempfile.TemporaryDirectory() as tmp:
        # Bare and rig alternate so drift on a shared machine hits both; the slow shuffled passes come last.
        for i in range(a.runs):
            times["bare"].append(
                bare_loop(
                    weights, grouped_prompts, spec.context_length, a.max_tokens, spec.engine_args.get("n_batch", 512)
                )
            )
            times["rig"].append(rig_run(a.data, a.limit, a.max_tokens, "grouped", Path(tmp) / f"g{i}"))
            print(
                f"pass {i + 1}: bare {times['bare'][-1]:.1f}s, rig {times['rig'][-1]:.1f}s, "
                f"ratio {times['rig'][-1] / times['bare'][-1]:.3f}",
                flush=True,
            )
        for i in range(a.shuffled_runs):
            times["rig_shuffled"].append(rig_run(a.data, a.limit, a.max_tokens, "shuffled", Path(tmp) / f"s{i}"))
            print(f"shuffled pass {i + 1}: {times['rig_shuffled'][-1]:.1f}s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios_over = [r / b for r, b in zip(times["rig"], times["bare"], strict=True)]
    ratios_shuf = [s / med["rig"] for s in times["rig_shuffled"]]
    lines = [
        "# Spine performance (CallNavi, embedded gemma3-270m, llama.cpp on CPU)",
        "",
        f"- Host: {platform.processor() or platform.machine()}, {__import__('os').cpu_count()} CPUs (shared, noisy); "
        f"{len(eps)} questions (params task), max_tokens {a.max_tokens}, greedy; {a.runs} interleaved runs "
        f"(bare, rig), {a.shuffled_runs} shuffled.",
        f"- Command: `python scripts/bench_spine.py --data <callnavi> --runs {a.runs}`",
        "",
        "| measure | median | per-run values |",
        "|---|---|---|",
        "| rig wall / bare llama-cpp-python wall (same prompts, grouped order) | "
        f"{statistics.median(ratios_over):.3f} | " + ", ".join(f"{r:.3f}" for r in ratios_over) + " |",
        f"| rig shuffled order / rig grouped order (median of grouped; {len(ratios_shuf)} shuffled pass(es)) | "
        f"{statistics.median(ratios_shuf):.3f} | " + ", ".join(f"{r:.3f}" for r in ratios_shuf) + " |",
        "",
        "Wall times include model load. Target: the first ratio at most 1.05; the second above 1.",
    ]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
