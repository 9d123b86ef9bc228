"""Decode MBU on the embedded model with llama.cpp on the CPU: rig's figure against an independent computation.

rig's figure: `rig bench` on CallNavi (seeded --limit), its RunSummary's decode MBU (bytes per token from the GGUF's
tensors touched plus the KV cache at each generation's context, x its decode tokens/s, over the probe's peak).
Independent: the model file's size x the decode tokens/s of a bare llama-cpp-python loop (no rig) at the same
prompt length / the probe's bandwidth. Interleaved rounds (the host is shared), medians. Also the probe's bandwidth
against a plain single-threaded numpy streaming read in the same run. Writes benchmarks/results/mbu.md.

    python scripts/bench_mbu.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from rig.registry import load_registry, resolve_weights
from rig.runs.bench import BenchOptions, run_bench
from rig.runs.screen import run_summaries
from rig.telemetry.bandwidth import probe_cpu, save_probe


def plain_numpy_read(size: int = 512 * 2**20, passes: int = 10) -> float:
    """One thread, ``a.max()``, best of as many passes as the probe times in all (5 with 1 thread, 5 with all)."""
    a = np.ones(size // 8)
    best = float("inf")
    for _ in range(passes):
        t = time.perf_counter()
        a.max()
        best = min(best, time.perf_counter() - t)
    return a.nbytes / best


def bare_decode_tps(weights: str, prompt_tokens: int, tokens: int, threads: int) -> float:
    """Tokens/s of llama-cpp-python's own generate loop, greedy, after a prompt of ``prompt_tokens`` tokens."""
    from llama_cpp import Llama

    llm = Llama(model_path=weights, n_ctx=4096, n_threads=threads, n_gpu_layers=0, seed=0, verbose=False)
    words = llm.tokenize(b" the map shows a route from the station to the harbour and back again", add_bos=False)
    prompt = [llm.token_bos(), *(words * (prompt_tokens // len(words) + 1))[: prompt_tokens - 1]]
    stamps = []
    for _ in llm.generate(prompt, temp=0.0, reset=True):
        stamps.append(time.perf_counter())
        if len(stamps) == tokens:
            break
    llm.close()
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])  # as rig counts: tokens after the first over their span


def bandwidth_section(rounds: int, out: Path) -> None:
    probes, plains = [], []
    for _ in range(rounds):
        p = probe_cpu()
        probes.append(p.bytes_per_s)
        plains.append(plain_numpy_read())
    ratio = statistics.median(probes) / statistics.median(plains)
    lines = [
        "",
        f"## The probe against a plain numpy read ({rounds} interleaved rounds, `--bandwidth-only`)",
        "",
        f"Probe: {p.method} (last round).",
        "",
        "| measure | median | rounds |",
        "|---|---|---|",
        f"| `rig doctor --bandwidth` probe (GB/s) | {statistics.median(probes) / 1e9:.2f} | "
        + ", ".join(f"{x / 1e9:.2f}" for x in probes)
        + " |",
        f"| plain numpy read, one thread, best of 10 (GB/s) | {statistics.median(plains) / 1e9:.2f} | "
        + ", ".join(f"{x / 1e9:.2f}" for x in plains)
        + " |",
        "",
        f"- probe / plain numpy read: **{ratio:.3f}** (the check: within 20%, "
        f"{'met' if abs(ratio - 1) <= 0.20 else 'NOT met'}).",
        "",
    ]
    with out.open("a") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/mbu.md"))
    ap.add_argument("--bandwidth-only", action="store_true", help="only the probe against numpy, appended to --out")
    a = ap.parse_args()
    if a.bandwidth_only:
        bandwidth_section(a.rounds, a.out)
        return
    reg = load_registry()
    weights = resolve_weights(reg.get("gemma3-270m"), reg.path)
    file_bytes = Path(weights).stat().st_size
    from rig.engines.llamacpp import physical_cores

    threads = physical_cores()
    work = Path(tempfile.mkdtemp(prefix="rig-mbu-"))
    os.environ["RIG_CACHE"] = str(work / "cache")  # the probe measured here is the one this run's MBU is set against
    probes, plains, rig_mbu, rig_tps, rig_bpt, bare_tps, prompts = [], [], [], [], [], [], []
    for i in range(a.rounds):
        p = probe_cpu()
        probes.append(p.bytes_per_s)
        plains.append(plain_numpy_read())
        save_probe(p)
        run_dir = run_bench(
            BenchOptions(
                model="gemma3-270m", benchmark="callnavi", limit=a.limit, max_tokens=a.max_tokens, out=work / "runs"
            )
        )
        _man, sums = run_summaries(run_dir)
        eff = sums[0].efficiency
        assert eff.mbu is not None and eff.bytes_per_token is not None, eff
        rig_mbu.append(eff.mbu)
        rig_bpt.append(eff.bytes_per_token)
        rig_tps.append(eff.decode_bytes_per_s / eff.bytes_per_token)  # type: ignore[operator]
        prompt = round(sums[0].prompt_tokens_mean or 0)
        prompts.append(prompt)
        bare_tps.append(bare_decode_tps(weights, prompt, a.max_tokens, threads))
        print(
            f"round {i + 1}: probe {p.bytes_per_s / 1e9:.2f} GB/s, numpy {plains[-1] / 1e9:.2f} GB/s, rig MBU "
            f"{100 * eff.mbu:.1f}% at {rig_tps[-1]:.1f} tok/s, bare {bare_tps[-1]:.1f} tok/s",
            flush=True,
        )
    peak = statistics.median(probes)
    independent = [file_bytes * t / pk for t, pk in zip(bare_tps, probes, strict=True)]
    med = statistics.median
    ratio_mbu = med(rig_mbu) / med(independent)
    ratio_bw = med(probes) / med(plains)
    rows = [
        ("probe peak read bandwidth (GB/s)", [x / 1e9 for x in probes]),
        ("plain numpy read, one thread (GB/s)", [x / 1e9 for x in plains]),
        ("rig decode tokens/s (RunSummary)", rig_tps),
        ("bare llama-cpp-python decode tokens/s", bare_tps),
        ("rig bytes per token (MB)", [x / 1e6 for x in rig_bpt]),
        ("rig decode MBU (%)", [100 * x for x in rig_mbu]),
        ("independent MBU: file size x bare tok/s / probe (%)", [100 * x for x in independent]),
    ]
    lines = [
        "# Decode memory-bandwidth utilisation (MBU): embedded model, llama.cpp on the CPU",
        "",
        f"Host: {platform.node()}, {p.device_name}, {threads} decode threads; shared with other jobs (timings are "
        f"noisy: medians of {a.rounds} interleaved rounds). Model: gemma3-270m Q4_K_M, file {file_bytes / 1e6:.1f} MB. "
        f"rig: `rig bench -b callnavi --limit {a.limit} --max-tokens {a.max_tokens}` (mean prompt "
        f"{med(prompts):.0f} tokens); bare: llama-cpp-python `generate` over a prompt of the same length, "
        f"{a.max_tokens} tokens. Made by `python scripts/bench_mbu.py --rounds {a.rounds}`.",
        "",
        "| measure | median | rounds |",
        "|---|---|---|",
        *[f"| {name} | {med(vals):.2f} | {', '.join(f'{v:.2f}' for v in vals)} |" for name, vals in rows],
        "",
        f"- rig's MBU / the independent computation: **{ratio_mbu:.3f}** (the check: within 10%, "
        f"{'met' if abs(ratio_mbu - 1) <= 0.10 else 'NOT met'}).",
        f"- probe / plain numpy read: **{ratio_bw:.3f}** (the check: within 20%, "
        f"{'met' if abs(ratio_bw - 1) <= 0.20 else 'NOT met'}).",
        f"- Peak used for MBU: the probe's median {peak / 1e9:.2f} GB/s.",
        "",
    ]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
