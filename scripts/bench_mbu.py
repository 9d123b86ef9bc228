"""Decode MBU on the embedded model, llama.cpp or vLLM on the CPU: rig's figure against an independent computation.

rig's figure: `rig bench` on CallNavi (seeded --limit), its RunSummary's decode MBU (bytes per token from the weights
touched plus the KV cache at each generation's context, x its decode tokens/s, over the probe's peak).
Independent: the weights' size (the GGUF file; for vLLM the bf16 safetensors it runs) x the decode tokens/s of a bare
engine loop (no rig: llama-cpp-python's ``generate``, or vLLM's ``AsyncLLM`` streaming one request) at the same
prompt length / the probe's bandwidth. Interleaved rounds (the host is shared), medians.

Also the probe's bandwidth against a plain numpy streaming read measured in the same round, with the thread count
of the probe's winning figure (each thread reads its own buffer; numpy releases the GIL inside a reduction), and
with one thread for reference.

    python scripts/bench_mbu.py --rounds 3
    RIG_VLLM_CPU_MODEL=DIR VLLM_CPU_KVCACHE_SPACE=1 VLLM_HOST_IP=127.0.0.1 \\
        .venv-vllm/bin/python scripts/bench_mbu.py --engine vllm --rounds 2 --out benchmarks/results/mbu_vllm.md
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import multiprocessing
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import yaml

from rig.execution.bench import BenchOptions, run_bench
from rig.registry import load_registry, resolve_weights
from rig.render.screen import run_summaries
from rig.telemetry.bandwidth import probe_cpu
from rig.telemetry.peak import save_probe


def in_child(fn, *args):  # type: ignore[no-untyped-def]
    """``fn(*args)`` in a fresh process. A bare loop run here would leave llama.cpp's OpenMP team of this process's
    main thread alive, and with more OpenMP threads than CPUs libgomp stops spin-waiting: the next rig run in this
    process would decode slower for that reason alone."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:  # not daemonic: vLLM forks
        return pool.submit(fn, *args).result()


PHRASE = " the map shows a route from the station to the harbour and back again"


def plain_numpy_read(threads: int = 1, size: int = 512 * 2**20, passes: int = 10) -> float:
    """Bytes/s of ``threads`` threads each taking ``a.max()`` of its own buffer (``size`` in all), started together
    at a barrier; a pass lasts from the first thread's start to the last one's end, best of ``passes``. Written
    apart from the probe (its own buffers, threads and clock), as the check it is."""
    bufs = [np.ones(size // 8 // threads) for _ in range(threads)]
    start = threading.Barrier(threads)
    spans: list[list[tuple[float, float]]] = [[] for _ in range(threads)]

    def reader(i: int) -> None:
        for _ in range(passes):
            start.wait()
            t = time.perf_counter()
            bufs[i].max()
            spans[i].append((t, time.perf_counter()))

    workers = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    best = min(max(s[p][1] for s in spans) - min(s[p][0] for s in spans) for p in range(passes))
    return sum(b.nbytes for b in bufs) / best


def bare_llamacpp_tps(weights: str, prompt_tokens: int, tokens: int, threads: int, n_ctx: int) -> float:
    """Tokens/s of llama-cpp-python's own generate loop, greedy, after a prompt of ``prompt_tokens`` tokens."""
    from llama_cpp import Llama

    llm = Llama(model_path=weights, n_ctx=n_ctx, n_threads=threads, n_gpu_layers=0, seed=0, verbose=False)
    words = llm.tokenize(PHRASE.encode(), add_bos=False)
    prompt = [llm.token_bos(), *(words * (prompt_tokens // len(words) + 1))[: prompt_tokens - 1]]
    stamps = []
    for _ in llm.generate(prompt, temp=0.0, reset=True):
        stamps.append(time.perf_counter())
        if len(stamps) == tokens:
            break
    llm.close()
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])  # as rig counts: tokens after the first over their span


def bare_vllm_tps(folder: str, prompt_tokens: int, tokens: int, n_ctx: int, engine_args: dict) -> float:
    """Tokens/s of vLLM's AsyncLLM streaming one greedy request (every token as it comes, timed here, not by
    vLLM's metrics), after a prompt of ``prompt_tokens`` tokens; the engine settings rig's entry gives."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

    eng = AsyncLLM.from_engine_args(AsyncEngineArgs(model=folder, max_model_len=n_ctx, seed=0, **engine_args))

    async def go() -> float:
        tok = eng.get_tokenizer()
        tok = await tok if inspect.isawaitable(tok) else tok
        words = tok.encode(PHRASE, add_special_tokens=False)
        prompt = [tok.bos_token_id, *(words * (prompt_tokens // len(words) + 1))[: prompt_tokens - 1]]
        params = SamplingParams(
            temperature=0.0, max_tokens=tokens, ignore_eos=True, output_kind=RequestOutputKind.DELTA
        )
        stamps: list[tuple[float, int]] = []
        async for out in eng.generate(TokensPrompt(prompt_token_ids=prompt), params, uuid.uuid4().hex):
            stamps.append((time.perf_counter(), len(out.outputs[0].token_ids)))
        n = sum(k for _, k in stamps[1:])  # tokens after the first output's, over their span
        return n / (stamps[-1][0] - stamps[0][0])

    try:
        return asyncio.run(go())
    finally:
        eng.shutdown()


def vllm_registry(work: Path, folder: Path) -> tuple[str, dict, int]:
    """A models.yaml naming the converted folder on vLLM (rig's own entry for it), set as RIG_MODELS."""
    from rig.convert import hf_entry

    base = load_registry().get("gemma3-270m")
    entry = hf_entry(base, folder)
    path = work / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {"gemma3-270m-hf": entry}}))
    os.environ["RIG_MODELS"] = str(path)
    return "gemma3-270m-hf", entry["engine_args"], base.context_length


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=("llamacpp", "vllm"), default="llamacpp")
    ap.add_argument("--hf-dir", type=Path, default=os.environ.get("RIG_VLLM_CPU_MODEL"), help="vllm: the folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/mbu.md"))
    ap.add_argument("--bandwidth-only", action="store_true", help="only the probe against the plain numpy reads")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rig-mbu-"))
    os.environ["RIG_CACHE"] = str(work / "cache")  # the probe measured here is the one this run's MBU is set against
    from rig.engines.llamacpp import physical_cores

    threads = physical_cores()
    if a.engine == "vllm":
        if a.hf_dir is None:
            ap.error("--engine vllm needs --hf-dir (or RIG_VLLM_CPU_MODEL): a folder from rig models convert")
        folder = a.hf_dir.resolve()
        model, engine_args, n_ctx = vllm_registry(work, folder)
        weights_bytes = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        what = f"gemma3-270m converted to bf16 safetensors ({weights_bytes / 1e6:.1f} MB)"

        def bare(prompt: int) -> float:
            return in_child(bare_vllm_tps, str(folder), prompt, a.max_tokens, n_ctx, engine_args)

        bare_name = "vLLM AsyncLLM streaming one request"
    else:
        reg = load_registry()
        spec = reg.get("gemma3-270m")
        weights = resolve_weights(spec, reg.path)
        weights_bytes = Path(weights).stat().st_size
        model, what = "gemma3-270m", f"gemma3-270m Q4_K_M, file {weights_bytes / 1e6:.1f} MB"

        def bare(prompt: int) -> float:
            return in_child(bare_llamacpp_tps, weights, prompt, a.max_tokens, threads, spec.context_length)

        bare_name = "llama-cpp-python `generate`"
    probes, probe_threads, plains, plains_one, rig_mbu, rig_tps, rig_bpt, bare_tps, prompts = ([] for _ in range(9))
    for i in range(a.rounds):
        p = probe_cpu()
        probes.append(p.bytes_per_s)
        probe_threads.append(p.threads or 1)
        plains.append(plain_numpy_read(p.threads or 1))  # the same thread count as the probe's winning figure
        plains_one.append(plain_numpy_read(1))
        save_probe(p)
        if a.bandwidth_only:
            print(
                f"round {i + 1}: probe {p.bytes_per_s / 1e9:.2f} GB/s ({p.threads} threads), numpy "
                f"{plains[-1] / 1e9:.2f} GB/s, one thread {plains_one[-1] / 1e9:.2f} GB/s",
                flush=True,
            )
            continue
        run_dir = run_bench(
            BenchOptions(model=model, benchmark="callnavi", limit=a.limit, max_tokens=a.max_tokens, out=work / "runs")
        )
        _man, sums = run_summaries(run_dir)
        eff = sums[0].efficiency
        assert eff.mbu is not None and eff.bytes_per_token is not None, eff
        rig_mbu.append(eff.mbu)
        rig_bpt.append(eff.bytes_per_token)
        rig_tps.append(eff.decode_bytes_per_s / eff.bytes_per_token)  # type: ignore[operator]
        prompt = round(sums[0].prompt_tokens_mean or 0)
        prompts.append(prompt)
        bare_tps.append(bare(prompt))
        print(
            f"round {i + 1}: probe {p.bytes_per_s / 1e9:.2f} GB/s ({p.threads} threads), numpy {plains[-1] / 1e9:.2f} "
            f"GB/s, rig MBU {100 * eff.mbu:.1f}% at {rig_tps[-1]:.1f} tok/s, bare {bare_tps[-1]:.1f} tok/s, "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    med = statistics.median
    ratio_bw = med(probes) / med(plains)
    n_threads = ", ".join(sorted({str(n) for n in probe_threads}))
    bw_check = (
        f"- probe / plain numpy read with the same threads ({n_threads}): **{ratio_bw:.3f}** (the check: within 20%, "
        f"{'met' if abs(ratio_bw - 1) <= 0.20 else 'NOT met'})."
    )
    if a.bandwidth_only:
        print(
            f"probe {med(probes) / 1e9:.2f}, plain {med(plains) / 1e9:.2f}, one thread {med(plains_one) / 1e9:.2f} GB/s"
        )
        print(bw_check)
        return
    peak = med(probes)
    independent = [weights_bytes * t / pk for t, pk in zip(bare_tps, probes, strict=True)]
    ratio_mbu = med(rig_mbu) / med(independent)
    rows = [
        ("probe peak read bandwidth (GB/s)", [x / 1e9 for x in probes]),
        ("threads of the probe's peak", [float(n) for n in probe_threads]),
        ("plain numpy read, the probe's thread count (GB/s)", [x / 1e9 for x in plains]),
        ("plain numpy read, one thread (GB/s)", [x / 1e9 for x in plains_one]),
        ("rig decode tokens/s (RunSummary)", rig_tps),
        (f"bare {a.engine} decode tokens/s", bare_tps),
        ("rig bytes per token (MB)", [x / 1e6 for x in rig_bpt]),
        ("rig decode MBU (%)", [100 * x for x in rig_mbu]),
        ("independent MBU: weights x bare tok/s / probe (%)", [100 * x for x in independent]),
    ]
    engine_text = f"{threads} decode threads" if a.engine == "llamacpp" else "vLLM CPU"
    lines = [
        f"# Decode memory-bandwidth utilisation (MBU): embedded model, {a.engine} on the CPU",
        "",
        f"Host: {platform.node()}, {p.device_name}, {engine_text}; load average {os.getloadavg()[0]:.1f} at the end "
        f"(medians of {a.rounds} interleaved rounds). Model: {what}. "
        f"rig: `rig bench -b callnavi --limit {a.limit} --max-tokens {a.max_tokens}` (mean prompt "
        f"{med(prompts):.0f} tokens); bare: {bare_name} over a prompt of the same length, {a.max_tokens} tokens. "
        f"Made by `python scripts/bench_mbu.py --engine {a.engine} --rounds {a.rounds}`.",
        "",
        "| measure | median | rounds |",
        "|---|---|---|",
        *[f"| {name} | {med(vals):.2f} | {', '.join(f'{v:.2f}' for v in vals)} |" for name, vals in rows],
        "",
        f"- rig's MBU / the independent computation: **{ratio_mbu:.3f}** (the check: within 10%, "
        f"{'met' if abs(ratio_mbu - 1) <= 0.10 else 'NOT met'}).",
        bw_check,
        f"- Peak used for MBU: the probe's median {peak / 1e9:.2f} GB/s.",
        "",
    ]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
