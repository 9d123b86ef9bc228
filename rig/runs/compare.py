"""`rig compare`: the same episodes on several model variants, each in its own process, paired.

Each variant runs as a separate `rig bench` process so GPU memory is clean and measured from its own baseline.
The report pairs episodes by (episode id, repeat): accuracy with bootstrap CIs, paired differences against the
first variant, per-sample flips, latency, tokens, memory, and Pareto plots.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rig.benchmarks.base import Table
from rig.runs.bench import BenchError, BenchOptions
from rig.runs.manifest import RunManifest
from rig.runs.plots import scatter_svg
from rig.runs.report import NM, table_md
from rig.runs.store import Store
from rig.runs.summary import HeadlineScore, RunSummary, benchmark_of, summarize
from rig.scoring.stats import paired_diff_ci


def interpreter(model: str, o: BenchOptions) -> str:
    """The Python that runs a variant: ``RIG_PYTHON_<ENGINE>`` when set (vLLM's CPU build lives in a venv of its
    own: ``RIG_PYTHON_VLLM=.venv-vllm/bin/python``), else this one. An unknown model is left to ``rig bench``."""
    from rig.registry import RegistryError, load_registry

    try:
        engine = load_registry(o.models_file).get(model).engine
    except RegistryError:
        return sys.executable
    return os.environ.get(f"RIG_PYTHON_{engine.upper()}") or sys.executable


def bench_argv(model: str, o: BenchOptions, out: Path) -> list[str]:
    assert o.benchmark is not None  # run_compare refuses options without one
    argv = [interpreter(model, o), "-m", "rig.cli", "bench", "--model", model, "--benchmark", o.benchmark,
            "--out", str(out), "--no-report", "--seed", str(o.seed if o.seed is not None else 0),
            "--repeats", str(o.repeats), "--decode", o.decode, "--tool-mode", o.tool_mode,
            "--concurrency", str(o.concurrency)]
    for flag, val in (("--limit", o.limit), ("--data", o.data), ("--gpu", o.gpu), ("--max-tokens", o.max_tokens),
                      ("--temperature", o.temperature), ("--models", o.models_file), ("--shard", o.shard),
                      ("--resume", o.resume), ("--order", o.order)):
        if val is not None:
            argv += [flag, str(val)]
    for k, v in o.options.items():
        argv += ["-O", f"{k}={v}"]
    return argv


def run_compare(models: list[str], opts: BenchOptions,
                say: Callable[[str], object] = print) -> tuple[Path, list[Path]]:
    if len(models) < 2:
        raise BenchError("rig compare needs at least two models")
    if opts.benchmark is None:
        raise BenchError("rig compare runs one benchmark: name it with --benchmark")
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


def run_summary(run_dir: Path) -> RunSummary:
    """The variant's first (in practice only) benchmark, with its headline score per episode for pairing."""
    man = RunManifest.read(run_dir)
    b = man.config.benchmarks[0]
    store = Store(run_dir / "results.sqlite")
    try:
        results = store.results(b.name)
    finally:
        store.close()
    return summarize(man, results, b, benchmark_of(b).headline)


def gib(b: int | None) -> float | None:
    return None if b is None else b / 2**30


def paired(base: dict[tuple[str, int], float], other: dict[tuple[str, int], float],
           keys: list[tuple[str, int]]) -> list[float | int | None]:
    """Paired samples, mean difference (other - base) with its bootstrap CI, flips to correct, flips to wrong."""
    a, b = [base[k] for k in keys], [other[k] for k in keys]
    d = lo = hi = None
    if len(keys) >= 2:
        d, lo, hi = paired_diff_ci(a, b)
    worse = sum(1 for x, y in zip(a, b, strict=True) if x >= 0.5 > y)
    better = sum(1 for x, y in zip(a, b, strict=True) if x < 0.5 <= y)
    return [len(keys), d, lo, hi, better, worse]


def compare_report(run_dirs: list[Path]) -> tuple[str, dict[str, str]]:
    """Markdown and SVG plots (name -> svg text) for runs of the same benchmark."""
    sums = [run_summary(d) for d in run_dirs]
    scores = [s.headline.by_episode() if s.headline else {} for s in sums]
    base = scores[0]
    common = set(base).intersection(*[set(s) for s in scores[1:]])
    warn = ""
    if any(set(s) != set(base) for s in scores[1:]):
        warn = f"Runs cover different episodes; paired statistics use the {len(common)} common ones."
    keys = sorted(common)
    rows, diff_rows = [], []
    for s in sums:
        h = s.headline or HeadlineScore(samples=0)
        rows.append([s.model, s.quantization, h.samples, h.mean, h.low, h.high, s.e2e_p50_s, s.e2e_p95_s,
                     s.ttft_p50_s, s.decode_tps_median, s.completion_tokens_mean,
                     NM if s.cut_share is None else s.cut_share,
                     NM if s.gpu_peak_bytes is None else gib(s.gpu_peak_bytes),
                     gib(s.peak_rss_bytes), s.load_time_s])
    for s, sc in list(zip(sums, scores, strict=True))[1:]:
        diff_rows.append([s.model, *paired(base, sc, keys)])
    t1 = Table(title="Variants", columns=["Model", "Quant", "Samples", "Accuracy", "CI low", "CI high",
                                          "E2E p50 (s)", "E2E p95 (s)", "TTFT p50 (s)", "Decode tok/s",
                                          "Completion tokens", "Cut at max_tokens", "GPU peak (GiB)", "RSS peak (GiB)",
                                          "Load (s)"],
               rows=rows, note="Accuracy = the benchmark's headline per-episode score, 95% bootstrap CI. " + warn)
    t2 = Table(title=f"Paired differences against {sums[0].model}",
               columns=["Model", "Paired samples", "Mean diff", "CI low", "CI high", "Flips to correct",
                        "Flips to wrong"],
               rows=diff_rows, note="A flip compares per-episode scores at 0.5 (correct / wrong).")
    on_gpu = all(s.gpu_peak_bytes is not None for s in sums)
    mem_axis = "GPU peak (GiB)" if on_gpu else "process RSS peak (GiB)"
    acc = [s.headline.mean if s.headline else None for s in sums]
    plots = {
        "pareto_latency.svg": scatter_svg([(s.model, s.e2e_p50_s, a) for s, a in zip(sums, acc, strict=True)],
                                          "end-to-end latency p50 (s)", "accuracy", "Accuracy against latency"),
        "pareto_memory.svg": scatter_svg(
            [(s.model, gib(s.gpu_peak_bytes if on_gpu else s.peak_rss_bytes), a)
             for s, a in zip(sums, acc, strict=True)],
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

