"""The one screen `rig bench` ends with: a row per benchmark rendered from its `RunSummary` (nothing recomputed),
and where the full report is. The full tables stay in report.md and `rig report`."""

from __future__ import annotations

from pathlib import Path

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import Table
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest
from rig.runfolder.summary import RunSummary
from rig.telemetry.bandwidth import REFRESH_HINT

NM = "not measured"
COLUMNS = [
    "benchmark",
    "episodes",
    "headline [95% CI]",
    "headline is",
    "cut",
    "latency p50",
    "tok/s",
    "peak mem",
    "J/ep, MBU",
]


def run_summaries(run_dir: Path) -> tuple[RunManifest, list[RunSummary]]:
    """One `RunSummary` per benchmark of the run, with its headline score."""
    folder = RunFolder(run_dir)
    return folder.manifest, folder.summaries()


def headline_text(s: RunSummary) -> str:
    h = s.headline
    if h is None or h.samples == 0:
        return NM
    if h.mean is None:  # one sample: a score but no interval
        return f"{h.scores[0].score:.2f} (n=1, no CI)"
    return f"{h.mean:.2f} [{h.low:.2f}, {h.high:.2f}]"


def memory_text(s: RunSummary) -> str:
    if s.gpu_peak_bytes is not None:
        return f"GPU {s.gpu_peak_bytes / 2**30:.2f} GiB"
    return NM if s.peak_rss_bytes is None else f"RSS {s.peak_rss_bytes / 2**30:.2f} GiB"


def summary_row(s: RunSummary) -> list[str]:
    eps = f"{s.episodes}/{s.expected_episodes}" + (f", {s.failed} failed" if s.failed else "")
    cut = NM if s.cut_replies is None else f"{s.cut_replies}/{s.finish_reasons}"
    lat = NM if s.e2e_p50_s is None else f"{s.e2e_p50_s:.2f} s"
    tps = NM if s.decode_tps_median is None else f"{s.decode_tps_median:.1f}"
    what = get_benchmark_class(s.benchmark).headline_name if s.benchmark else "headline score"
    if s.headline and s.headline.source:
        what += f" ({s.headline.source})"
    return [s.benchmark or "all", eps, headline_text(s), what, cut, lat, tps, memory_text(s), efficiency_text(s)]


def efficiency_text(s: RunSummary) -> str:
    """Joules per episode and decode MBU in one cell (the screen fits 80 columns); one "not measured" for both."""
    joules = None if s.energy.per_episode_j is None else f"{s.energy.per_episode_j:.3g} J"
    f = s.efficiency
    mbu = None if f.mbu is None else f"MBU {100 * f.mbu:.1f}%"
    if f.peak_wrong:
        mbu = "MBU: peak wrong"
    if mbu and (f.peak_doubts or f.peak_wrong):
        mbu += "*"  # the line under the table says why
    if joules is None and mbu is None:
        return NM
    return f"{joules or 'J ' + NM}, {mbu or 'MBU ' + NM}"


def peak_lines(sums: list[RunSummary]) -> list[str]:
    """Under the table, for the MBU figures shown: the peak's source, and after "*" why it is in doubt or wrong."""
    sources, marks = [], []
    for s in sums:
        f, name = s.efficiency, s.benchmark or "all"
        if f.mbu is None and not f.peak_wrong:
            continue
        if f.peak_source:
            sources.append(f"MBU peak: {f.peak_source}")
        if f.peak_wrong:
            marks.append(f"* {name}: MBU {f.mbu_reason}")
        elif f.peak_doubts:
            marks.append(f"* {name}: peak in doubt: {'; '.join(f.peak_doubts)}; {REFRESH_HINT}")
    return list(dict.fromkeys(sources + marks))


def final_screen(run_dir: Path) -> tuple[Table, list[str]]:
    """The summary table and the lines under it (where report.md and the HTML report are, what to run next)."""
    man, sums = run_summaries(run_dir)
    cfg = man.config
    title = (
        f"{man.run_id}: {cfg.model.name} ({cfg.model.quantization}), decode {cfg.decode}, "
        f"tool mode {cfg.tool_mode}, {man.status}"
    )
    rows = [summary_row(s) for s in sums]
    columns = COLUMNS
    note = (
        "headline: mean per-episode score, 95% bootstrap CI; cut: replies stopped at max_tokens; "
        "latency: end-to-end per generation; memory: the run's peak"
    )
    if all(r[-1] == NM for r in rows):  # the screen fits 80 columns: a column of "not measured" becomes one line
        rows, columns = [r[:-1] for r in rows], columns[:-1]
        note += "; energy per episode and decode MBU: not measured (report.md says why)"
    else:
        note += "; J/ep: energy per episode net of idle; MBU: decode memory-bandwidth utilisation"
    table = Table(title=title, columns=columns, rows=rows, note=note)
    lines = peak_lines(sums)
    lines.append(f"full tables: {run_dir / 'report.md'} (again with `rig report {run_dir}`)")
    html = run_dir / "report.html"
    lines.append(f"dashboard: {html}" if html.exists() else f"dashboard: rig report {run_dir} --html")
    return table, lines
