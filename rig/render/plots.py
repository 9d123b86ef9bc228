"""Report figures drawn with matplotlib (Agg backend, nothing fetched): SVG inline in the HTML report, and SVG, PDF
and PNG files a reader can put in a paper.

Rates (accuracy, pass rates) sit on a fixed 0-1 axis, so an all-zero result reads as zero rather than as a scale
stretched to nothing; other axes start at 0. Confidence intervals are error bars; point labels are kept inside the
frame. matplotlib is the `plots` extra: it is imported when a figure is drawn, never at import time.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rig.records import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("svg", "pdf", "png")
MISSING = "figures need matplotlib: pip install 'rig[plots]'"
COLOR, FRONT = "#2a6fdb", "#c33"


class PlotsUnavailable(RuntimeError):
    """matplotlib is not installed; str() says which extra brings it."""


class Point(BaseModel):
    """One variant on a Pareto plot: cost on x (lower is better), a rate on y (higher is better) with its CI."""

    label: str
    x: float | None
    y: float | None
    y_low: float | None = None
    y_high: float | None = None


def _figure(width: float = 5.6, height: float = 3.6) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotsUnavailable(MISSING) from None
    # A Figure made directly uses no pyplot state and no GUI backend (Agg canvases when saved).
    return Figure(figsize=(width, height), layout="constrained")


def pareto_front(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both axes (lower x, higher y), in x order."""
    front: list[tuple[float, float]] = []
    best = float("-inf")
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return front


def pareto_plot(points: list[Point], x_label: str, y_label: str, title: str, rate: bool = True) -> Figure:
    """Labelled scatter with CI error bars and the Pareto front as a dashed step line. Unmeasured points are listed
    under the plot rather than drawn at 0."""
    fig = _figure()
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    drawn = [p for p in points if p.x is not None and p.y is not None]
    missing = [p.label for p in points if p.x is None or p.y is None]
    if rate:
        ax.set_ylim(-0.05, 1.05)  # a rate is 0-1 whatever the data: 0.000 must look like 0, not like a tall bar
    xmax = max((p.x for p in drawn if p.x is not None), default=1.0) or 1.0
    ax.set_xlim(0, xmax * 1.25)
    labels = []
    for p in drawn:
        assert p.x is not None and p.y is not None
        yerr = None
        if p.y_low is not None and p.y_high is not None:
            yerr = [[max(p.y - p.y_low, 0.0)], [max(p.y_high - p.y, 0.0)]]
        bars = ax.errorbar([p.x], [p.y], yerr=yerr, fmt="o", color=COLOR, ecolor=COLOR, capsize=4, markersize=6)
        bars.lines[0].set_gid(f"point:{p.label}")  # the marker's SVG group is named after the variant
        # Labels lean left of points in the right half so that none is cut at the frame; near the top of a rate
        # axis they go below the point, clear of the title.
        right_half = p.x > xmax * 0.6
        below = rate and p.y > 0.85
        labels.append(
            ax.annotate(
                p.label,
                (p.x, p.y),
                xytext=(-8 if right_half else 8, -8 if below else 8),
                textcoords="offset points",
                ha="right" if right_half else "left",
                va="top" if below else "baseline",
                fontsize=8,
                annotation_clip=True,
            )
        )
    _separate_labels(fig, labels)
    front = pareto_front((p.x, p.y) for p in drawn if p.x is not None and p.y is not None)
    if len(front) > 1:
        ax.step(
            [x for x, _ in front],
            [y for _, y in front],
            where="post",
            color=FRONT,
            linestyle="--",
            linewidth=1,
            label="Pareto front",
        )
        ax.legend(loc="lower right", fontsize=8, frameon=False)
    if missing:
        fig.text(0.01, 0.01, "not measured: " + ", ".join(missing), fontsize=7, color="#555")
    ax.grid(alpha=0.3)
    return fig


def _separate_labels(fig: Figure, labels: list[Any]) -> None:
    """Stack point labels that would overlap (variants with equal scores sit on one line): each one that hits an
    earlier label moves up past it, or below its point when up would leave the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()  # runs the layout so that extents are final
    top = labels[0].axes.get_window_extent(renderer).y1 if labels else 0.0
    placed: list[Any] = []
    for text in labels:
        start = text.xyann
        for _ in range(len(placed) + 1):
            box = text.get_window_extent(renderer)
            hit = next((b for b in placed if b.overlaps(box)), None)
            if hit is None:
                break
            dx, dy = text.xyann
            step = (hit.y1 - box.y0) * 72 / fig.dpi + 2  # points
            up = box.y1 + step * fig.dpi / 72 <= top
            text.xyann = (dx, dy + step) if up else (dx, dy - (box.y1 - hit.y0) * 72 / fig.dpi - 2)
        placed.append(text.get_window_extent(renderer))
        if text.xyann != start:  # a moved label is tied to its point by a leader, so it cannot be read as another's
            _leader(text, placed[-1])


def _leader(text: Any, box: Any) -> None:
    """A thin line from the point to the nearest edge of its label's box (display coordinates, drawn in data ones)."""
    ax = text.axes
    px, py = ax.transData.transform(text.xy)
    lx, ly = min(max(px, box.x0), box.x1), min(max(py, box.y0), box.y1)
    (qx, qy), (mx, my) = ax.transData.inverted().transform([(px, py), (lx, ly)])
    ax.plot([qx, mx], [qy, my], color="#888888", linewidth=0.6, zorder=1, gid=f"leader:{text.get_text()}")


def bar_plot(
    labels: list[str],
    values: list[float | None],
    title: str,
    x_label: str,
    rate: bool = False,
    low: list[float | None] | None = None,
    high: list[float | None] | None = None,
) -> Figure:
    """Horizontal bars (one per label), with CI whiskers when given; a None value is drawn as no bar and says so."""
    fig = _figure(5.6, 0.6 + 0.32 * max(len(labels), 1))
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(x_label)
    ys = list(range(len(labels)))[::-1]
    vals = [0.0 if v is None else v for v in values]
    ax.barh(ys, vals, color=COLOR, height=0.6)
    if low is not None and high is not None:
        for y, v, lo, hi in zip(ys, values, low, high, strict=True):
            if v is not None and lo is not None and hi is not None:
                ax.errorbar(
                    [v], [y], xerr=[[max(v - lo, 0.0)], [max(hi - v, 0.0)]], fmt="none", ecolor="#222", capsize=3
                )
    ax.set_yticks(ys, labels, fontsize=8)
    if rate:
        ax.set_xlim(0, 1)
    else:
        ax.set_xlim(0, max(vals, default=1.0) * 1.15 or 1.0)
    right = ax.get_xlim()[1]
    for i, (y, v) in enumerate(zip(ys, values, strict=True)):
        if v is None:
            ax.text(0.01, y, "not measured", va="center", fontsize=8, color="#555", transform=ax.get_yaxis_transform())
            continue
        # The value is written beside its bar (after the whisker), so a 0.00 reads as measured zero, not as missing.
        hi = high[i] if high is not None else None
        end = v if hi is None else hi
        text = f"{v:.2f}" if rate else f"{v:g}"
        if end > 0.8 * right:  # no room to the right: inside the bar's end
            ax.text(v - 0.01 * right, y, text, va="center", ha="right", fontsize=8, color="white", gid=f"value:{i}")
        else:
            ax.text(end + 0.01 * right, y, text, va="center", ha="left", fontsize=8, color="#222", gid=f"value:{i}")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _not_measured(fig: Figure, title: str, why: str | None) -> Figure:
    """A figure that says there is no data and why: no axes, so nothing reads as a count or a value of 0."""
    fig.set_size_inches(5.6, 0.7)
    text = f"{title}: not measured" + (f" ({why})" if why else "")
    fig.text(0.02, 0.5, text, va="center", fontsize=10, color="#555", gid="not-measured")
    return fig


def histogram_plot(
    values: list[float], title: str, x_label: str, bins: int = 20, integer: bool = False, why: str | None = None
) -> Figure:
    """Counts per bin over the values' range, the x axis from 0. The axes' SVG group is named `histogram:<title>` and
    each bar's `bin<i>:<count>`, so the page says what it draws. Integer data spanning fewer values than `bins` get
    one bar per value (no empty bins between integers). No values: a figure saying not measured and `why`."""
    fig = _figure(5.6, 2.4)
    if not values:
        return _not_measured(fig, title, why)
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot()
    ax.set_gid(f"histogram:{title}")
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(x_label)
    ax.set_ylabel("count")
    edges: int | list[float] = bins
    lo, hi = min(values), max(values)
    if integer and hi - lo + 1 <= bins:
        edges = [lo - 0.5 + k for k in range(int(hi - lo) + 2)]
    elif hi == lo:  # one value: one narrow bar at it (numpy would centre a unit range on it, reaching below 0)
        width = abs(lo) * 0.1 or 0.1
        edges = [max(0.0, lo - width / 2), lo + width / 2]
    counts, used, _ = ax.hist(values, bins=edges, color=COLOR)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts: no 0.5 ticks
    for i, (bar, n) in enumerate(zip(ax.patches, counts, strict=True)):  # the axes hold the bars only
        bar.set_gid(f"bin{i}:{int(n)}")
    left = min(0.0, float(used[0]))  # from 0, unless a bin around 0 reaches below it
    ax.set_xlim(left, float(used[-1]) + 0.02 * (float(used[-1]) - left))  # the last bar clear of the frame
    return fig


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # attaches the Agg canvas; pdf and svg writers are picked by format
    buf = io.BytesIO()
    meta: dict[str, Any] = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt, {})
    # Without a salt, SVG clip-path ids are random: the same figure would give different bytes each time.
    with mpl.rc_context({"svg.hashsalt": "rig"}):
        fig.savefig(buf, format=fmt, dpi=150, metadata=meta)
    return buf.getvalue()


def figure_svg(fig: Figure) -> str:
    """SVG text to inline in an HTML page (no XML prolog or DOCTYPE; ids made unique per figure)."""
    svg = figure_bytes(fig, "svg").decode("utf-8")
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)  # RDF creator block: bytes, no picture
    # matplotlib names clip paths and glyphs with ids that repeat across figures; one page holds many figures. The
    # prefix comes from the figure's own bytes, so the same run renders the same page (an export re-sends nothing);
    # two identical figures on one page share ids that point at identical elements.
    tag = "f" + hashlib.sha256(svg.encode()).hexdigest()[:12]
    return re.sub(r'(id="|url\(#|href="#)([A-Za-z_][\w.-]*)', lambda m: f"{m.group(1)}{tag}-{m.group(2)}", svg)


def save_figure(fig: Figure, folder: Path, stem: str, formats: Iterable[str] = FORMATS) -> list[Path]:
    """Write the figure as stem.svg / .pdf / .png in folder; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = folder / f"{stem}.{fmt}"
        write_atomic(path, figure_bytes(fig, fmt))
        paths.append(path)
    return paths


def line_plot(
    xs: list[float], ys: list[float], title: str, x_label: str, y_label: str, why: str | None = None
) -> Figure:
    """A line from 0 on both axes; fewer than two points: a figure saying not measured and `why`."""
    fig = _figure(5.6, 2.4)
    if len(xs) < 2:
        return _not_measured(fig, title, why)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.plot(xs, ys, color=COLOR, linewidth=1)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    return fig


def load_plot(
    levels: list[int],
    scores: list[tuple[float | None, float | None, float | None]],
    latencies: dict[str, list[float | None]],
    title: str,
) -> Figure:
    """Score (with CI) and latency percentiles against concurrency, side by side; a level with a value not
    measured is left out of that line and named under the plot."""
    fig = _figure(8.4, 3.2)
    ax_s, ax_l = fig.subplots(1, 2)
    fig.suptitle(title, fontsize=11)
    missing: list[str] = []
    for ax in (ax_s, ax_l):
        ax.set_xlabel("concurrency")
        if len(levels) > 1 and levels[-1] / levels[0] >= 4:
            ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(n) for n in levels])
        ax.grid(alpha=0.3)
    pts = [(n, s) for n, s in zip(levels, scores, strict=True) if s[0] is not None]
    missing += [f"score at {n}" for n, s in zip(levels, scores, strict=True) if s[0] is None]
    for n, (y, lo, hi) in pts:
        assert y is not None
        yerr = None if lo is None or hi is None else [[max(y - lo, 0.0)], [max(hi - y, 0.0)]]
        bars = ax_s.errorbar([n], [y], yerr=yerr, fmt="o", color=COLOR, ecolor=COLOR, capsize=4, markersize=5)
        bars.lines[0].set_gid(f"score:{n}")
    if len(pts) > 1:
        ax_s.plot([n for n, _ in pts], [s[0] for _, s in pts], color=COLOR, linewidth=1)
    ax_s.set_ylim(-0.05, 1.05)
    ax_s.set_ylabel("headline score (95% CI)")
    for i, (name, values) in enumerate(latencies.items()):
        xy = [(n, v) for n, v in zip(levels, values, strict=True) if v is not None]
        missing += [f"{name} at {n}" for n, v in zip(levels, values, strict=True) if v is None]
        if xy:
            (line,) = ax_l.plot(
                [n for n, _ in xy], [v for _, v in xy], marker="os^"[i % 3], color=(COLOR, FRONT, "#555")[i % 3]
            )
            line.set_label(name)
            line.set_gid(f"latency:{name}")
    ax_l.set_ylim(bottom=0)
    ax_l.set_ylabel("latency (s)")
    if ax_l.lines:
        ax_l.legend(fontsize=8, frameon=False)
    if missing:
        fig.text(0.01, 0.01, "not measured: " + ", ".join(missing), fontsize=7, color="#555")
    return fig


def scatter_plot(
    series: dict[str, list[tuple[float, float]]], title: str, x_label: str, y_label: str, why: str | None = None
) -> Figure:
    """Points per named series (one colour each, a legend), with a line at y = 0; each series' SVG group is named
    `series:<name>`. No points at all: a figure saying not measured and `why`."""
    fig = _figure()
    if not any(series.values()):
        return _not_measured(fig, title, why)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.axhline(0, color="#888", linewidth=0.8)
    for name, pts in series.items():
        if pts:
            dots = ax.scatter([x for x, _ in pts], [y for _, y in pts], s=18, alpha=0.8, label=name)
            dots.set_gid(f"series:{name}")
    ax.set_xlim(left=0)
    ax.legend(fontsize=8, frameon=False)
    ax.grid(alpha=0.3)
    return fig
