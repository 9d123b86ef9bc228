"""The divergence section of a comparison's HTML page (``compare.html``), from the folder's ``divergence.json``:
mean KLD per token class and variant with its CI, each episode's KLD against its score change, and the tables of
``compare.md``'s section (classes, episodes whose score changed, worst tokens)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.analyses.divergence.output import read_report
from rig.analyses.divergence.records import DivergenceReport
from rig.names import escape
from rig.render.plots import PlotsUnavailable, bar_plot, figure_svg, save_figure, scatter_plot


def divergence_figures(report: DivergenceReport) -> dict[str, Any]:
    """File stem -> figure: KLD per class (bars with 95% CI whiskers) and per-episode KLD against score delta.
    Raises PlotsUnavailable without matplotlib."""
    measured = [r for r in report.classes if r.tokens > 0]
    by_class = bar_plot(
        [f"{r.variant} · {r.token_class}" for r in measured],
        [r.mean_kld for r in measured],
        f"Mean KL divergence against {report.reference} per token class (95% CI)",
        "mean KL divergence, nats per token",
        low=[r.kld_ci_low for r in measured],
        high=[r.kld_ci_high for r in measured],
    )
    series: dict[str, list[tuple[float, float]]] = {}
    for e in report.episode_rows:
        if e.token_class == "all":
            pts = series.setdefault(e.variant, [])
            if e.score_delta is not None:
                pts.append((e.mean_kld, e.score_delta))
    against = scatter_plot(
        series,
        "Episodes: divergence against score change",
        "episode mean KL divergence (nats per token)",
        "score delta (variant - reference)",
        why="no variant's own run scored these episodes (score deltas need each variant's run)",
    )
    return {"divergence_kld_by_class": by_class, "divergence_kld_vs_score": against}


def _table(title: str, columns: list[str], rows: list[list[Any]], note: str = "") -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "not measured"
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(cell(v))}</td>" for v in r) + "</tr>" for r in rows)
    tail = f'<p class="note">{escape(note)}</p>' if note else ""
    return f"<h3>{escape(title)}</h3><table><tr>{head}</tr>{body}</table>{tail}"


def divergence_html(report: DivergenceReport, figures: dict[str, Any] | None = None) -> str:
    """The section: figures inline as SVG (a note instead when matplotlib is missing), then the tables."""
    missing = ""
    if figures is None:
        try:
            figures = divergence_figures(report)
        except PlotsUnavailable as e:
            figures, missing = {}, str(e)
    plots = (
        '<div class="plots">' + "".join(figure_svg(f) for f in figures.values()) + "</div>"
        if figures
        else f'<p class="note">{escape(missing)}</p>'
        if missing
        else ""
    )
    scope = "full vocabulary" if report.full_vocabulary else "top-k approximation"
    intro = (
        f"Each variant teacher-forced on the {report.pairs} replies of {report.episodes} reference episodes "
        f"({report.engine}, {scope}; KL divergence reference -> variant in nats; 95% CI by resampling episodes; "
        "top-1 = the two models' most likely tokens agree)."
    )
    classes = _table(
        "KL divergence per token class",
        ["Variant", "Kind", "Token class", "Tokens", "Mean KLD", "CI low", "CI high", "Top-1 agreement", "p99 KLD"],
        [
            [
                *(r.variant, r.kind, r.token_class, r.tokens, r.mean_kld),
                *(r.kld_ci_low, r.kld_ci_high, r.top1_agreement, r.p99_kld),
            ]
            for r in report.classes
            if r.tokens > 0 or r.token_class == "all"
        ],
    )
    flips = [e for e in report.episode_rows if e.score_delta not in (None, 0.0) and e.token_class != "all"]
    flipped = (
        _table(
            "Episodes whose score changed, by token class of the divergence",
            ["Variant", "Episode", "Score delta", "Token class", "Tokens", "Mean KLD", "Top-1 agreement"],
            [
                [
                    *(e.variant, f"{e.episode_id}#{e.repeat}", e.score_delta, e.token_class),
                    *(e.tokens, e.mean_kld, e.top1_agreement),
                ]
                for e in sorted(flips, key=lambda e: (e.variant, e.episode_id, e.repeat, -e.mean_kld))
            ],
        )
        if flips
        else ""
    )
    worst = (
        _table(
            "Worst tokens",
            ["Variant", "Episode", "Class", "KLD", "log p ref", "log p variant", "Context"],
            [
                [
                    *(w.variant, f"{w.episode_id}#{w.repeat}", w.token_class, w.kld),
                    *(w.logprob_reference, w.logprob_variant, w.context),
                ]
                for w in report.worst
            ],
        )
        if report.worst
        else ""
    )
    return (
        f'<section class="dash" id="divergence"><h2>Token-level divergence against {escape(report.reference)}</h2>'
        f'<p class="note">{escape(intro)}</p>{plots}{classes}{flipped}{worst}</section>'
    )


def divergence_section(cdir: Path) -> str:
    """The section for a comparison folder holding ``divergence.json`` ("" when it holds none); its figures are
    also written there as SVG, PDF and PNG, like the comparison's own."""
    if not (cdir / "divergence.json").is_file():
        return ""
    report = read_report(cdir)
    try:
        figures: dict[str, Any] | None = divergence_figures(report)
    except PlotsUnavailable:
        figures = None  # the section says so in place of the figures
    for stem, fig in (figures or {}).items():
        save_figure(fig, cdir, stem)
    return divergence_html(report, figures)
