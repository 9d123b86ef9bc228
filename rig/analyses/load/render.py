"""Rendering a load report: tables, the figure, load.md and load.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.analyses.load.records import LoadReport
from rig.analyses.load.slo import QUANTILES
from rig.records import write_atomic, write_record


def load_tables(rep: LoadReport) -> list[Any]:
    from rig.benchmarks.base import Table

    def nm(v: float | None) -> float | str:
        return "not measured" if v is None else v

    rows = []
    for r in rep.results:
        rows.append(
            [
                r.level,
                nm(r.peak_in_flight),
                r.samples,
                nm(r.score),
                nm(r.score_low),
                nm(r.score_high),
                "reference" if r.level == rep.levels[0] else nm(r.diff),
                "" if r.level == rep.levels[0] else nm(r.diff_low),
                "" if r.level == rep.levels[0] else f"{r.flips_to_correct} / {r.flips_to_wrong}",
                "" if r.level == rep.levels[0] else nm(r.replies_changed),
                *(nm(r.ttft_s[q]) for q in QUANTILES),
                *(nm(r.e2e_s[q]) for q in QUANTILES),
                nm(r.tokens_per_s),
                r.goodput_note if r.goodput_per_s is None else r.goodput_per_s,
                "yes" if r.passes else "no: " + "; ".join(r.why_not),
            ]
        )
    slo_text = ", ".join(f"{s.key} <= {s.limit_s:g} s" for s in rep.slos) or "none given"
    t = Table(
        title=f"Accuracy under load: {rep.model} on {rep.benchmark}",
        columns=[
            "Concurrency",
            "Peak in flight",
            "Samples",
            "Score",
            "CI low",
            "CI high",
            "Paired diff",
            "Diff CI low",
            "Flips to correct / wrong",
            "Replies changed",
            *(f"TTFT {q} (s)" for q in QUANTILES),
            *(f"E2E {q} (s)" for q in QUANTILES),
            "Completion tok/s",
            "Goodput (episodes/s)",
            "Passes",
        ],
        rows=rows,
        note=f"Score = the benchmark's headline per-episode score, 95% bootstrap CI; paired against level 1 by "
        "(episode, repeat); a flip compares scores at 0.5; replies changed counts paired episodes whose reply texts "
        "differ from level 1's (same seed, batched numerics). "
        f"Non-inferior: paired-difference CI low >= -{rep.margin:g}. "
        f"SLOs: {slo_text}, over every request of the level; goodput counts episodes whose every request met every "
        "SLO threshold. Peak in flight is observed from episode start and finish times.",
    )
    return [t]


def load_figure(rep: LoadReport) -> Any:
    from rig.render.plots import load_plot

    rs = rep.results
    return load_plot(
        [r.level for r in rs],
        [(r.score, r.score_low, r.score_high) for r in rs],
        {"TTFT p95": [r.ttft_s["p95"] for r in rs], "E2E p95": [r.e2e_s["p95"] for r in rs]},
        f"{rep.model} on {rep.benchmark}",
    )


def load_markdown(rep: LoadReport, figure: str) -> str:
    """The verdict, the table, then `figure` (its markdown, or why there is none)."""
    from rig.render.report import table_md

    v = rep.verdict
    head = f"**Verdict: {'none' if v.level is None else f'concurrency {v.level}'}** ({v.reason})."
    lines = [f"# rig load: {rep.model} on {rep.benchmark}", "", head, ""]
    lines += [table_md(t) for t in load_tables(rep)]
    lines += [figure, ""]
    return "\n".join(lines)


def load_html(rep: LoadReport, figure: str) -> str:
    """The self-contained page (the run report's CSP and styles): the verdict, the table, then `figure` (inline SVG,
    or a note saying why there is none)."""
    from rig.names import escape
    from rig.render.html import CSP, CSS, table_html

    v = rep.verdict
    title = f"rig load: {rep.model} on {rep.benchmark}"
    verdict = "none" if v.level is None else f"concurrency {v.level}"
    return (
        f'<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
        f"<p><b>Verdict: {escape(verdict)}</b> ({escape(v.reason)}).</p>"
        + "".join(table_html(t) for t in load_tables(rep))
        + f'<div class="plots">{figure}</div></body></html>'
    )


def write_load(ldir: Path, rep: LoadReport) -> str:
    """load.json (the typed report), load.md, load.html and the figure (SVG, PDF, PNG) in the load folder, each
    written whole (`write_atomic`)."""
    from rig.names import escape
    from rig.render.plots import PlotsUnavailable, figure_svg, save_figure

    write_record(ldir / "load.json", rep)
    try:
        fig = load_figure(rep)
        save_figure(fig, ldir, "load")
        figure = "![score and p95 latency against concurrency](load.svg)"
        inline = figure_svg(fig)
    except PlotsUnavailable as e:
        figure = f"_No figure: {e}._"
        inline = f'<p class="note">No figure: {escape(str(e))}.</p>'
    md = load_markdown(rep, figure)
    write_atomic(ldir / "load.md", md)
    write_atomic(ldir / "load.html", load_html(rep, inline))
    return md
