"""Markdown report of a run: the benchmark's own tables, then latency, tokens and memory.

A value that was not measured prints as "not measured", never as 0.
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean, median
from typing import Any

from rig.benchmarks import benchmark_tables, get_benchmark_class
from rig.benchmarks.base import Table
from rig.records import EpisodeResult
from rig.runs.store import Store
from rig.scoring.stats import mean_ci, percentile
from rig.telemetry.manifest import RunManifest

NM = "not measured"


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _gib(b: float | None) -> str:
    return NM if b is None else f"{b / 2**30:.2f} GiB"


def table_md(t: Table) -> str:
    lines = [f"### {t.title}", "", "| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.columns) - 1)) + " |")
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join(lines) + "\n"


def telemetry_table(results: list[EpisodeResult], manifest: RunManifest) -> Table:
    gens = [g for r in results for g in r.generations]

    def pct(vals: list[float | None], q: float) -> str:
        v = percentile([x for x in vals if x is not None], q)
        return NM if v is None else f"{v:.3f}"

    e2e = [g.timings.e2e_s for g in gens]
    ttft = [g.timings.ttft_s for g in gens]
    tps = [g.timings.decode_tps for g in gens if g.timings.decode_tps is not None]
    pt = [g.prompt_tokens for g in gens if g.prompt_tokens is not None]
    ct = [g.completion_tokens for g in gens if g.completion_tokens is not None]
    finished = [g.finish_reason for g in gens if g.finish_reason is not None]
    gpu = manifest.gpu_memory
    if gpu is None or not gpu.available:
        gpu_peak = gpu_load = f"{NM} ({gpu.reason if gpu else 'no GPU record'})"
    else:
        gpu_peak, gpu_load = _gib(gpu.peak_bytes), _gib(gpu.load_bytes)
    rows = [
        ["Episodes (done / failed)", f"{len(results)} / {sum(r.status == 'failed' for r in results)}"],
        ["Generations", len(gens)],
        ["End-to-end latency p50 / p95 (s)", f"{pct(e2e, 50)} / {pct(e2e, 95)}"],
        ["Time to first token p50 / p95 (s)", f"{pct(ttft, 50)} / {pct(ttft, 95)}"],
        ["Decode speed median (tokens/s)", f"{median(tps):.1f}" if tps else NM],
        ["Prompt tokens mean / total", f"{mean(pt):.0f} / {sum(pt)}" if pt else NM],
        ["Completion tokens mean / total", f"{mean(ct):.1f} / {sum(ct)}" if ct else NM],
        ["Replies cut at max_tokens", f"{finished.count('length')} of {len(finished)}" if finished else NM],
        ["Model load time (s)", fmt(manifest.load_time_s, 2) if manifest.load_time_s is not None else NM],
        ["Peak process RSS", _gib(manifest.peak_rss_bytes)],
        ["GPU memory after load, over baseline", gpu_load],
        ["GPU memory peak (device used)", gpu_peak],
    ]
    return Table(title="Latency, tokens, memory", columns=["Measure", "Value"], rows=rows)


def ci_table(bench: Any, results: list[EpisodeResult], label: str) -> Table | None:
    vals = [v for v in (bench.headline(r) for r in results) if v is not None]
    if len(vals) < 2:
        return None
    m, lo, hi = mean_ci(vals)
    return Table(title="Headline score with 95% bootstrap CI", columns=["Model", "Samples", "Mean", "CI low", "CI high"],
                 rows=[[label, len(vals), m, lo, hi]])


def report_markdown(run_dir: Path) -> str:
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").exists():
        raise FileNotFoundError(f"{run_dir}: no manifest.json (is this a run directory?)")
    man = RunManifest.read(run_dir)
    store = Store(run_dir / "results.sqlite")
    try:
        cfg = man.config
        spec = cfg.model
        out = [f"# rig report: {man.run_id}", "",
               f"- Model: **{spec.name}** ({spec.engine}, {spec.quantization}, context {spec.context_length})",
               f"- Decode: {cfg.decode}; tool mode: {cfg.tool_mode}; temperature {cfg.temperature}; seed {cfg.seed}; "
               f"repeats {cfg.repeats}",
               f"- Host: {man.host.cpu} ({man.host.cpu_count} CPUs); GPU: "
               f"{(man.gpu_memory.device_name if man.gpu_memory and man.gpu_memory.available else 'none')}",
               f"- Status: {man.status}; rig {man.rig_version} ({(man.git_revision or 'no git')[:10]}); "
               f"versions: {', '.join(f'{k} {v}' for k, v in man.versions.items())}", ""]
        for b in cfg.benchmarks:
            results = store.results(b.name)
            expected = b.episodes * cfg.repeats
            out.append(f"## {b.name} (data {b.data_hash}, {len(results)} of {expected} episodes)\n")
            if len(results) < expected:
                out.append(f"_Incomplete run: {expected - len(results)} episode(s) missing; "
                           f"resume with `rig bench --resume {man.run_id}`._\n")
            bench = get_benchmark_class(b.name)
            for t in benchmark_tables(b, results, label=spec.name):
                out.append(table_md(t))
            ci = ci_table(bench, results, spec.name)
            if ci:
                out.append(table_md(ci))
            out.append(table_md(telemetry_table(results, man)))
        return "\n".join(out)
    finally:
        store.close()
