"""`rig compare`: the same episodes on several model variants, each in its own process, paired.

Each variant runs as a separate `rig bench` process so GPU memory is clean and measured from its own baseline.
The report pairs episodes by (episode id, repeat): accuracy with bootstrap CIs, paired differences against the
first variant, per-sample flips, latency, tokens, memory, and Pareto plots.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from pydantic import BaseModel

from rig.benchmarks import get_benchmark_class
from rig.runs.bench import BenchError, BenchOptions
from rig.runs.plots import scatter_svg
from rig.runs.report import NM, fmt, table_md
from rig.benchmarks.base import Table
from rig.runs.store import Store
from rig.scoring.stats import mean_ci, paired_diff_ci, percentile
from rig.telemetry.manifest import RunManifest


class VariantSummary(BaseModel):
    name: str
    run_id: str
    quantization: str
    n: int
    acc: float | None
    acc_lo: float | None
    acc_hi: float | None
    e2e_p50: float | None
    e2e_p95: float | None
    ttft_p50: float | None
    decode_tps: float | None
    completion_tokens_mean: float | None
    cut_rate: float | None  # share of replies cut at max_tokens; None when the engine gave no finish reasons
    gpu_peak_gib: float | None
    rss_peak_gib: float | None
    load_s: float | None


def bench_argv(model: str, o: BenchOptions, out: Path) -> list[str]:
    argv = [sys.executable, "-m", "rig.cli", "bench", "--model", model, "--benchmark", o.benchmark,
            "--out", str(out), "--no-report", "--seed", str(o.seed if o.seed is not None else 0),
            "--repeats", str(o.repeats), "--decode", o.decode, "--tool-mode", o.tool_mode, "--concurrency", str(o.concurrency)]
    for flag, val in (("--limit", o.limit), ("--data", o.data), ("--gpu", o.gpu), ("--max-tokens", o.max_tokens),
                      ("--temperature", o.temperature), ("--models", o.models_file)):
        if val is not None:
            argv += [flag, str(val)]
    for k, v in o.options.items():
        argv += ["-O", f"{k}={v}"]
    return argv


def run_compare(models: list[str], opts: BenchOptions, say=print) -> tuple[Path, list[Path]]:  # type: ignore[no-untyped-def]
    if len(models) < 2:
        raise BenchError("rig compare needs at least two models")
    cdir = opts.out / f"compare-{time.strftime('%Y%m%d-%H%M%S')}-{opts.benchmark}"
    cdir.mkdir(parents=True, exist_ok=False)
    run_dirs = []
    for m in models:
        say(f"== {m} (own process)")
        before = set((cdir / "runs").glob("*")) if (cdir / "runs").exists() else set()
        r = subprocess.run(bench_argv(m, opts, cdir / "runs"), stdout=None, stderr=None)
        after = set((cdir / "runs").glob("*")) - before
        if r.returncode != 0 or len(after) != 1:
            raise BenchError(f"rig bench --model {m} failed (exit {r.returncode}); see its output above")
        run_dirs.append(after.pop())
    return cdir, run_dirs


def _summary(run_dir: Path) -> tuple[VariantSummary, dict[tuple[str, int], float]]:
    man = RunManifest.read(run_dir)
    b = man.config.benchmarks[0]
    bench = get_benchmark_class(b.name)
    store = Store(run_dir / "results.sqlite")
    try:
        results = store.results(b.name)
    finally:
        store.close()
    scores = {(r.episode_id, r.repeat): v for r in results if (v := bench.headline(r)) is not None}
    gens = [g for r in results for g in r.generations]
    e2e = [g.timings.e2e_s for g in gens if g.timings.e2e_s is not None]
    ttft = [g.timings.ttft_s for g in gens if g.timings.ttft_s is not None]
    tps = [g.timings.decode_tps for g in gens if g.timings.decode_tps is not None]
    ct = [g.completion_tokens for g in gens if g.completion_tokens is not None]
    finished = [g.finish_reason for g in gens if g.finish_reason is not None]
    acc = lo = hi = None
    if len(scores) >= 2:
        acc, lo, hi = mean_ci(list(scores.values()))
    gpu = man.gpu_memory
    s = VariantSummary(
        name=man.config.model.name, run_id=man.run_id, quantization=man.config.model.quantization, n=len(scores),
        acc=acc, acc_lo=lo, acc_hi=hi, e2e_p50=percentile(e2e, 50), e2e_p95=percentile(e2e, 95),
        ttft_p50=percentile(ttft, 50), decode_tps=median(tps) if tps else None,
        completion_tokens_mean=sum(ct) / len(ct) if ct else None,
        cut_rate=finished.count("length") / len(finished) if finished else None,
        gpu_peak_gib=gpu.peak_bytes / 2**30 if gpu and gpu.available and gpu.peak_bytes else None,
        rss_peak_gib=man.peak_rss_bytes / 2**30 if man.peak_rss_bytes else None, load_s=man.load_time_s)
    return s, scores


def compare_report(run_dirs: list[Path]) -> tuple[str, dict[str, str]]:
    """Markdown and SVG plots (name -> svg text) for runs of the same benchmark."""
    sums, scores = zip(*(_summary(d) for d in run_dirs))
    base = scores[0]
    common = set(base).intersection(*[set(s) for s in scores[1:]])
    warn = ""
    if any(set(s) != set(base) for s in scores[1:]):
        warn = f"Runs cover different episodes; paired statistics use the {len(common)} common ones."
    keys = sorted(common)
    rows, diff_rows = [], []
    for s, sc in zip(sums, scores):
        rows.append([s.name, s.quantization, s.n, s.acc, s.acc_lo, s.acc_hi, s.e2e_p50, s.e2e_p95, s.ttft_p50,
                     s.decode_tps, s.completion_tokens_mean, s.cut_rate if s.cut_rate is not None else NM,
                     s.gpu_peak_gib if s.gpu_peak_gib is not None else NM,
                     s.rss_peak_gib, s.load_s])
    for s, sc in list(zip(sums, scores))[1:]:
        a, b = [base[k] for k in keys], [sc[k] for k in keys]
        d = lo = hi = None
        if len(keys) >= 2:
            d, lo, hi = paired_diff_ci(a, b)
        worse = sum(1 for x, y in zip(a, b) if x >= 0.5 > y)
        better = sum(1 for x, y in zip(a, b) if x < 0.5 <= y)
        diff_rows.append([s.name, len(keys), d, lo, hi, better, worse])
    t1 = Table(title="Variants", columns=["Model", "Quant", "Samples", "Accuracy", "CI low", "CI high",
                                          "E2E p50 (s)", "E2E p95 (s)", "TTFT p50 (s)", "Decode tok/s",
                                          "Completion tokens", "Cut at max_tokens", "GPU peak (GiB)", "RSS peak (GiB)",
                                          "Load (s)"],
               rows=rows, note="Accuracy = the benchmark's headline per-episode score, 95% bootstrap CI. " + warn)
    t2 = Table(title=f"Paired differences against {sums[0].name}",
               columns=["Model", "Paired samples", "Mean diff", "CI low", "CI high", "Flips to correct",
                        "Flips to wrong"],
               rows=diff_rows, note="A flip compares per-episode scores at 0.5 (correct / wrong).")
    mem_axis = "GPU peak (GiB)" if all(s.gpu_peak_gib is not None for s in sums) else "process RSS peak (GiB)"
    plots = {
        "pareto_latency.svg": scatter_svg([(s.name, s.e2e_p50, s.acc) for s in sums], "end-to-end latency p50 (s)",
                                          "accuracy", "Accuracy against latency"),
        "pareto_memory.svg": scatter_svg(
            [(s.name, s.gpu_peak_gib if mem_axis.startswith("GPU") else s.rss_peak_gib, s.acc) for s in sums],
            mem_axis, "accuracy", "Accuracy against memory"),
    }
    md = "\n".join([f"# rig compare ({len(sums)} variants)", "", table_md(t1), table_md(t2),
                    "![accuracy vs latency](pareto_latency.svg)", "", "![accuracy vs memory](pareto_memory.svg)", ""])
    return md, plots


def write_compare(cdir: Path, run_dirs: list[Path]) -> str:
    md, plots = compare_report(run_dirs)
    for name, svg in plots.items():
        (cdir / name).write_text(svg)
    (cdir / "compare.md").write_text(md)
    return md


__all__ = ["run_compare", "compare_report", "write_compare", "fmt"]
