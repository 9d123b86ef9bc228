"""The dashboard at the top of the HTML report: per benchmark the headline with its CI as a bar, why episodes
failed, latency and completion-token distributions, and across runs the Pareto plots; `Figures` keeps every figure
of the page (inlined as SVG, written beside it as files)."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from pydantic import BaseModel

from rig.records import EpisodeResult
from rig.render.plots import PlotsUnavailable, Point, bar_plot, figure_svg, histogram_plot, line_plot, pareto_plot
from rig.runfolder.config import BenchmarkInfo
from rig.runfolder.summary import RunSummary, benchmark_of
from rig.telemetry.gpu import GpuSample


class Figures:
    """The page's matplotlib figures: inlined as SVG, and kept to be written as files beside the HTML."""

    def __init__(self) -> None:
        self.figs: dict[str, Any] = {}

    def add(self, stem: str, make: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
        """The figure `make(*args, **kwargs)` inline; a note instead when matplotlib is missing."""
        try:
            fig = make(*args, **kwargs)
        except PlotsUnavailable as e:
            return f'<p class="note">{escape(str(e))}</p>'
        self.figs[stem] = fig
        return figure_svg(fig)


def gpu_line(samples: list[GpuSample], why: str | None, figs: Figures, stem: str) -> str:
    t0 = samples[0].t if samples else 0.0
    return figs.add(
        stem,
        line_plot,
        [s.t - t0 for s in samples],
        [s.used_bytes / 2**30 for s in samples],
        "GPU memory over time",
        "seconds",
        "GiB used",
        why=why,
    )


def no_values(replies: int, what: str) -> str:
    """Why a distribution has no values: the reason a histogram prints instead of bars."""
    return "no replies stored" if replies == 0 else f"none of the {replies} replies recorded {what}"


class BenchDash(BaseModel):
    run: str
    run_no: int  # the run's place in the report, 1-based: figure file names of several runs
    benchmark: str
    headline_name: str
    summary: RunSummary
    replies: int  # generations stored: says why a distribution below is empty
    e2e: list[float]
    tokens: list[float]
    reasons: dict[str, int]


def dashboard(
    dash: list[BenchDash], pareto: list[Point], pareto_mem: list[Point], pareto_energy: list[Point], figs: Figures
) -> str:
    if not dash:
        return ""
    several = len({d.run for d in dash}) > 1
    labels = [f"{d.run}: {d.benchmark}" if several else d.benchmark for d in dash]
    parts = [
        '<section class="dash"><h2>Dashboard</h2><p class="note">Headline = each benchmark\'s per-episode '
        "score ("
        + escape("; ".join(f"{b}: {h}" for b, h in dict.fromkeys((d.benchmark, d.headline_name) for d in dash)))
        + "), mean with 95% bootstrap CI; a benchmark with one scored episode has no interval.</p>",
        '<div class="plots">',
    ]
    parts += _headlines_and_failures(dash, labels, figs)
    parts.append('</div><h3>Latency and tokens</h3><div class="plots">')
    parts += _distributions(dash, labels, several, figs)
    parts.append("</div>")
    if len(pareto) > 1:
        parts += _across_runs(pareto, pareto_mem, pareto_energy, figs)
    parts.append("</section>")
    return "".join(parts)


def _headlines_and_failures(dash: list[BenchDash], labels: list[str], figs: Figures) -> list[str]:
    """Each benchmark's headline with its CI as a bar, and why episodes failed (or that none did)."""
    heads = [d.summary.headline for d in dash]
    parts = [
        figs.add(
            "headline",
            lambda: bar_plot(
                labels,
                [
                    h.mean if h and h.mean is not None else (h.scores[0].score if h and h.scores else None)
                    for h in heads
                ],
                "Headline score with 95% CI",
                "score (0-1)",
                rate=True,
                low=[h.low if h else None for h in heads],
                high=[h.high if h else None for h in heads],
            ),
        )
    ]
    reasons = [
        (f"{lab}: {why}", n) for lab, d in zip(labels, dash, strict=True) for why, n in sorted(d.reasons.items())
    ]
    if reasons:
        parts.append(
            figs.add(
                "failures",
                lambda: bar_plot(
                    [k for k, _ in reasons],
                    [float(n) for _, n in reasons],
                    "Why episodes failed (failure taxonomy)",
                    "episodes",
                ),
            )
        )
    else:
        parts.append('<p class="note">No failed episodes.</p>')
    return parts


def _distributions(dash: list[BenchDash], labels: list[str], several: bool, figs: Figures) -> list[str]:
    """Per benchmark (and run), the end-to-end latency and completion-token histograms."""
    parts = []
    for lab, d in zip(labels, dash, strict=True):
        stem = f"{d.benchmark}_{d.run_no}" if several else d.benchmark
        parts.append(
            figs.add(
                f"latency_{stem}",
                histogram_plot,
                d.e2e,
                f"{lab}: end-to-end latency",
                "seconds",
                why=no_values(d.replies, "a latency"),
            )
        )
        parts.append(
            figs.add(
                f"tokens_{stem}",
                histogram_plot,
                d.tokens,
                f"{lab}: completion tokens",
                "tokens",
                integer=True,
                why=no_values(d.replies, "a completion token count"),
            )
        )
    return parts


def _across_runs(pareto: list[Point], pareto_mem: list[Point], pareto_energy: list[Point], figs: Figures) -> list[str]:
    """The Pareto plots of several runs: score against latency, memory and, where measured, energy."""
    parts = [
        '<h3>Across runs</h3><div class="plots">',
        figs.add(
            "pareto_latency",
            lambda: pareto_plot(
                pareto, "end-to-end latency p50 (s)", "headline score (95% CI)", "Score against latency"
            ),
        ),
        figs.add(
            "pareto_memory",
            lambda: pareto_plot(pareto_mem, "peak memory (GiB)", "headline score (95% CI)", "Score against memory"),
        ),
    ]
    if any(p.x is not None for p in pareto_energy):
        parts.append(
            figs.add(
                "pareto_energy",
                lambda: pareto_plot(
                    pareto_energy,
                    "energy per episode (J, net of idle)",
                    "headline score (95% CI)",
                    "Score against energy",
                ),
            )
        )
    else:
        parts.append('<p class="note">Score against energy: not measured in any of these runs.</p>')
    parts.append("</div>")
    return parts


def bench_dash(
    label: str,
    i: int,
    b: BenchmarkInfo,
    summary: RunSummary,
    results: list[EpisodeResult],
) -> BenchDash:
    """One benchmark's dashboard entry: its summary, failure reasons and the latency and token distributions."""
    reasons = summary.failures.classes() if summary.failures else {}
    return BenchDash(
        run=label,
        run_no=i + 1,
        benchmark=b.name,
        headline_name=benchmark_of(b).headline_name
        + (f" ({summary.headline.source})" if summary.headline and summary.headline.source else ""),
        summary=summary,
        reasons=reasons,
        replies=summary.generations,
        e2e=[g.timings.e2e_s for r in results for g in r.generations if g.timings.e2e_s is not None],
        tokens=[float(g.completion_tokens) for r in results for g in r.generations if g.completion_tokens is not None],
    )
