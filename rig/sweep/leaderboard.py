"""The sweep's leaderboard: one row per cell from its run's `RunSummary` (statistics are never recomputed here),
paired differences against the baseline model's cell on the same benchmark and mode, Pareto plots per benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.analyses.compare import efficiency_compare_table, gib, judged_note, paired, run_summary
from rig.benchmarks.base import Table
from rig.names import escape
from rig.records import write_atomic
from rig.render.html import CSP, table_html
from rig.render.plots import Point, figure_svg, pareto_plot
from rig.render.report import table_md
from rig.runfolder.summary import HeadlineScore, RunSummary
from rig.sweep.spec import Cell

COLUMNS = [
    "Model",
    "Quant",
    "Benchmark",
    "Decode",
    "Tool mode",
    "Samples",
    "Score",
    "CI low",
    "CI high",
    "E2E p50 (s)",
    "E2E p95 (s)",
    "Completion tokens",
    "Peak memory (GiB)",
    "Memory",
    "Load (s)",
    "Cell",
]


def _bench(c: Cell) -> str:
    """The benchmark with its options, which tell two cells of one benchmark apart."""
    return " ".join([c.benchmark, *(f"{k}={v}" for k, v in sorted(c.options.items()))])


def _mode(c: Cell) -> tuple[str, str, str, str]:
    """What must match for two cells to be paired: all but the model."""
    return (c.benchmark, repr(sorted(c.options.items())), c.decode, c.tool_mode)


def leaderboard(cells: list[Cell], runs: dict[str, str | None], baseline: str) -> tuple[list[Table], dict[str, str]]:
    """Tables (leaderboard, paired differences, failed cells) and SVG plots (file name -> svg)."""
    sums: dict[str, RunSummary] = {c.key: run_summary(Path(r)) for c in cells if (r := runs.get(c.key))}
    rows, failed = _rows(cells, sums)
    diff_rows = _diff_rows(cells, sums, baseline)
    tables = [
        Table(
            title="Leaderboard",
            columns=COLUMNS,
            rows=rows,
            note=(
                "Score = the benchmark's headline per-episode score with its 95% bootstrap CI, from each run's "
                "RunSummary. Peak memory is the GPU peak where measured, else the process RSS peak. "
                + judged_note([(f"{s.model} on {_bench(c)}", s) for c in cells if (s := sums.get(c.key))])
            ).rstrip(),
        ),
        Table(
            title=f"Paired differences against {baseline}",
            columns=[
                "Model",
                "Benchmark",
                "Decode",
                "Tool mode",
                "Paired samples",
                "Mean diff",
                "CI low",
                "CI high",
                "Flips to correct",
                "Flips to wrong",
            ],
            rows=diff_rows,
            note="Same benchmark, options and modes; episodes paired by (episode id, repeat).",
        ),
    ]
    done = [c for c in cells if c.key in sums]
    eff = efficiency_compare_table(
        [sums[c.key] for c in done], [f"{c.model} {_bench(c)} {c.decode}/{c.tool_mode}" for c in done]
    )
    tables.append(eff.model_copy(update={"columns": ["Cell", *eff.columns[1:]]}))
    if failed:
        tables.append(
            Table(
                title="Failed cells",
                columns=["Model", "Benchmark", "Decode", "Tool mode", "Cell"],
                rows=failed,
                note="No finished run: see the cell's bench.log and job.json.",
            )
        )
    return tables, _plots(cells, sums)


def _rows(cells: list[Cell], sums: dict[str, RunSummary]) -> tuple[list[list[Any]], list[list[Any]]]:
    """The leaderboard's row of each finished cell, and the failed cells' rows."""
    rows, failed = [], []
    for c in cells:
        s = sums.get(c.key)
        if s is None:
            failed.append([c.model, _bench(c), c.decode, c.tool_mode, c.key])
            continue
        h = s.headline or HeadlineScore(samples=0)
        on_gpu = s.gpu_peak_bytes is not None
        rows.append(
            [
                s.model,
                s.quantization,
                _bench(c),
                c.decode,
                c.tool_mode,
                h.samples,
                h.mean,
                h.low,
                h.high,
                s.e2e_p50_s,
                s.e2e_p95_s,
                s.completion_tokens_mean,
                gib(s.gpu_peak_bytes if on_gpu else s.peak_rss_bytes),
                "GPU" if on_gpu else "RSS",
                s.load_time_s,
                c.key,
            ]
        )
    return rows, failed


def _diff_rows(cells: list[Cell], sums: dict[str, RunSummary], baseline: str) -> list[list[Any]]:
    """Each finished cell paired against the baseline model's cell of the same benchmark and mode."""
    diff_rows = []
    base_of = {_mode(c): c for c in cells if c.model == baseline and c.key in sums}
    for c in cells:
        b = base_of.get(_mode(c))
        if c.model == baseline or c.key not in sums or b is None:
            continue
        hb, hc = sums[b.key].headline, sums[c.key].headline
        bs, cs = (hb.by_episode() if hb else {}), (hc.by_episode() if hc else {})
        keys = sorted(set(bs) & set(cs))
        diff_rows.append([c.model, _bench(c), c.decode, c.tool_mode, *paired(bs, cs, keys)])
    return diff_rows


def _plots(cells: list[Cell], sums: dict[str, RunSummary]) -> dict[str, str]:
    """Per benchmark: score against latency, memory and (where measured) energy."""
    plots: dict[str, str] = {}
    for bench in dict.fromkeys(c.benchmark for c in cells):
        pts = [(c, sums[c.key]) for c in cells if c.benchmark == bench and c.key in sums]
        label = [
            (f"{s.model} {c.decode}/{c.tool_mode}" if len({_mode(x) for x, _ in pts}) > 1 else s.model) for c, s in pts
        ]
        on_gpu = all(s.gpu_peak_bytes is not None for _, s in pts)

        def point(n: str, s: RunSummary, x: float | None) -> Point:
            h = s.headline
            return Point(
                label=n, x=x, y=h.mean if h else None, y_low=h.low if h else None, y_high=h.high if h else None
            )

        plots[f"pareto_latency_{bench}.svg"] = figure_svg(
            pareto_plot(
                [point(n, s, s.e2e_p50_s) for n, (_, s) in zip(label, pts, strict=True)],
                "end-to-end latency p50 (s)",
                "score (95% CI)",
                f"{bench}: score against latency",
            )
        )
        plots[f"pareto_memory_{bench}.svg"] = figure_svg(
            pareto_plot(
                [
                    point(n, s, gib(s.gpu_peak_bytes if on_gpu else s.peak_rss_bytes))
                    for n, (_, s) in zip(label, pts, strict=True)
                ],
                "GPU peak (GiB)" if on_gpu else "process RSS peak (GiB)",
                "score (95% CI)",
                f"{bench}: score against memory",
            )
        )
        if any(s.energy.per_episode_j is not None for _, s in pts):
            plots[f"pareto_energy_{bench}.svg"] = figure_svg(
                pareto_plot(
                    [point(n, s, s.energy.per_episode_j) for n, (_, s) in zip(label, pts, strict=True)],
                    "energy per episode (J, net of idle)",
                    "score (95% CI)",
                    f"{bench}: score against energy",
                )
            )
    return plots


def write_leaderboard(out: Path, cells: list[Cell], runs: dict[str, str | None], baseline: str) -> str:
    """leaderboard.md, leaderboard.html (self-contained) and the SVG plots in `out`; returns the markdown."""
    tables, plots = leaderboard(cells, runs, baseline)
    for name, svg in plots.items():
        write_atomic(out / name, svg)
    md = "\n".join(
        [f"# rig sweep ({len(cells)} cells)", "", *[table_md(t) for t in tables], *[f"![{n}]({n})\n" for n in plots]]
    )
    write_atomic(out / "leaderboard.md", md)
    html = (
        f'<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>rig sweep</title>'
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}</style></head><body>"
        f"<h1>rig sweep ({len(cells)} cells)</h1>"
        + "".join(table_html(t) for t in tables)
        + "".join(f"<figure>{svg}<figcaption>{escape(n)}</figcaption></figure>" for n, svg in plots.items())
        + "</body></html>"
    )
    write_atomic(out / "leaderboard.html", html)
    return md
