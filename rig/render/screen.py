"""The one screen `rig bench` ends with: a row per benchmark rendered from its `RunSummary` (nothing recomputed),
and where the full report is. The full tables stay in report.md and `rig report`.

Terminals and CI logs are 80 to 120 columns wide, so the screen is laid out for the width it gets: `final_screen`
tries the widest layout first (what each headline measures, and who judged it, in the row) and moves those words into
the note under the table until every column fits; `column_widths` gives each column at least its longest word (a
number with its unit, or a CI, counts as one word), so the table wraps at spaces and never splits a word."""

from __future__ import annotations

from pathlib import Path

from rich.cells import cell_len

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import Table
from rig.render.reliability import screen_pass_k
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest
from rig.runfolder.summary import RunSummary
from rig.telemetry.peak import REFRESH_HINT

NM = "not measured"
GAP = 2  # blank columns between two table columns
HEADLINE = "headline [95% CI]"
WHAT = "headline is"
MEMORY = "peak mem (GiB)"
EFFICIENCY = "J/ep, MBU"
COLUMNS = [
    "benchmark",
    "episodes",
    HEADLINE,
    WHAT,
    "cut",
    "latency p50 (s)",
    "tok/s",
    MEMORY,
    EFFICIENCY,
]
# Cells of these columns are one value ("0.42 [0.30,0.55]", "RSS 1.13"): a line break inside one would misread.
WHOLE = {HEADLINE, MEMORY}
# The layouts `final_screen` tries, widest first: where a headline's name and its source (a judge) are printed.
LAYOUTS = ("row", "name in row", "note")


def run_summaries(run_dir: Path) -> tuple[RunManifest, list[RunSummary]]:
    """One `RunSummary` per benchmark of the run, with its headline score."""
    folder = RunFolder(run_dir)
    return folder.manifest, folder.summaries()


def headline_text(s: RunSummary) -> str:
    """Mean and 95% CI as one compact value; a single sample has no interval."""
    h = s.headline
    if h is None or h.samples == 0:
        return NM
    if h.mean is None:
        return f"{h.scores[0].score:.2f} (n=1)"
    return f"{h.mean:.2f} [{h.low:.2f},{h.high:.2f}]"


def memory_text(s: RunSummary) -> str:
    if s.gpu_peak_bytes is not None:
        return f"GPU {s.gpu_peak_bytes / 2**30:.2f}"
    return NM if s.peak_rss_bytes is None else f"RSS {s.peak_rss_bytes / 2**30:.2f}"


def headline_name(s: RunSummary) -> str:
    return get_benchmark_class(s.benchmark).headline_name if s.benchmark else "headline score"


def headline_source(s: RunSummary) -> str | None:
    return s.headline.source if s.headline and s.headline.source else None


def summary_row(s: RunSummary) -> list[str]:
    eps = f"{s.episodes}/{s.expected_episodes}" + (f", {s.failed} failed" if s.failed else "")
    cut = NM if s.cut_replies is None else f"{s.cut_replies}/{s.finish_reasons}"
    lat = NM if s.e2e_p50_s is None else f"{s.e2e_p50_s:.2f}"
    tps = NM if s.decode_tps_median is None else f"{s.decode_tps_median:.1f}"
    what = headline_name(s)
    if source := headline_source(s):
        what += f" ({source})"
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


def words(text: str, column: str) -> list[str]:
    """The pieces a cell may be wrapped between: its words, or the whole value in a `WHOLE` column."""
    return [text] if column in WHOLE and text != NM else text.split()


def column_widths(table: Table, width: int) -> list[int] | None:
    """Each column's width so that the table fits `width` columns (`GAP` between columns) and no word is split: at
    least its longest word, the room left to the columns that need least of it to stay on one line. None when the
    longest words alone do not fit."""
    lows, highs = [], []
    for i, name in enumerate(table.columns):
        cells = [str(r[i]) for r in table.rows]
        lows.append(max(cell_len(w) for text in [name, *cells] for w in words(text, name) or [""]))
        highs.append(max(cell_len(text) for text in [name, *cells]))
    room = width - GAP * (len(table.columns) - 1)
    if sum(lows) > room:
        return None
    if sum(highs) <= room:
        return highs
    widths, spare = list(lows), room - sum(lows)
    # The columns that need least to stay on one line get it first (a header such as "latency p50 (s)"); the rest of
    # the room goes to the wordiest, which wraps at its spaces.
    for i in sorted(range(len(widths)), key=lambda i: highs[i] - lows[i]):
        grow = min(highs[i] - lows[i], spare)
        widths[i] += grow
        spare -= grow
    return widths


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


def reliability_lines(sums: list[RunSummary]) -> list[str]:
    """With repeats, each benchmark's pass^k at the largest k measured, or why it is not."""
    out = []
    for s in sums:
        r = s.reliability
        if r is None or r.repeats < 2:
            continue
        text = screen_pass_k(r)
        episodes = r.rows[-1].episodes if r.rows else 0
        out.append(f"{s.benchmark}: {text} over {episodes} episodes" if text else f"{s.benchmark}: {r.reason}")
    return out


def final_screen(run_dir: Path, width: int | None = None) -> tuple[Table, list[str]]:
    """The summary table and the lines under it (where report.md and the HTML report are, what to run next), laid
    out for a terminal `width` columns wide (None: the widest layout). The lines: the MBU peak's source and doubts,
    then where the reports are (paths, printed whole)."""
    man, sums = run_summaries(run_dir)
    cfg = man.config
    title = f"{cfg.model.name} ({cfg.model.quantization}), decode {cfg.decode}, tool mode {cfg.tool_mode}, {man.status}"
    table = _layout(title, sums, LAYOUTS[0])
    for layout in LAYOUTS[1:]:
        if width is None or column_widths(table, width) is not None:
            break
        table = _layout(title, sums, layout)
    lines = peak_lines(sums) + reliability_lines(sums)
    lines.append(f"full tables: {run_dir / 'report.md'} (again with `rig report {run_dir}`)")
    html = run_dir / "report.html"
    lines.append(f"dashboard: {html}" if html.exists() else f"dashboard: rig report {run_dir} --html")
    return table, lines


def _layout(title: str, sums: list[RunSummary], layout: str) -> Table:
    """The table in one of `LAYOUTS`: the headline's name and source in the row, or moved into the note."""
    rows = [summary_row(s) for s in sums]
    columns = COLUMNS
    what = columns.index(WHAT)
    named: list[str] = []
    if layout == "name in row":
        named = [f"{s.benchmark or 'all'} headline by {src}" for s in sums if (src := headline_source(s))]
        for r, s in zip(rows, sums, strict=True):
            r[what] = headline_name(s)
    elif layout == "note":
        named = ["headline is: " + ", ".join(f"{r[0]} {r[what]}" for r in rows)]
        rows, columns = [r[:what] + r[what + 1 :] for r in rows], columns[:what] + columns[what + 1 :]
    notes = [
        *named,
        "headline: mean per-episode score, 95% bootstrap CI (n=1: one sample, no CI)",
        "cut: replies stopped at max_tokens",
        "latency: end-to-end per generation",
        "memory: the run's peak",
    ]
    if all(r[-1] == NM for r in rows):  # a column of "not measured" becomes one line
        rows, columns = [r[:-1] for r in rows], columns[:-1]
        notes.append("energy per episode and decode MBU: not measured (report.md says why)")
    else:
        notes.append("J/ep: energy per episode net of idle; MBU: decode memory-bandwidth utilisation")
    return Table(title=title, columns=columns, rows=rows, note="; ".join(notes))
