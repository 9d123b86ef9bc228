"""Report figures: rates on a fixed 0-1 axis, costs from 0, CIs as error bars, every label inside the frame."""

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from rig.runs.plots import Point, figure_svg, pareto_front, pareto_plot, save_figure


def _render(fig):  # type: ignore[no-untyped-def]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_all_zero_rates_sit_on_a_0_1_axis_and_labels_stay_inside() -> None:
    pts = [
        Point(label="gemma3-270m@decode=none", x=3.2, y=0.0, y_low=0.0, y_high=0.0),
        Point(label="gemma3-270m@decode=json", x=12.7, y=0.0, y_low=0.0, y_high=0.0),
    ]
    fig = pareto_plot(pts, "latency p50 (s)", "accuracy", "Accuracy against latency")
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert low <= 0 and high >= 1 and high - low < 1.2  # the 0-1 scale, not one stretched to 1e-09
    assert ax.get_xlim()[0] == 0  # latency from 0, not from the fastest variant
    renderer = _render(fig)
    frame = fig.bbox
    for text in ax.texts:  # point labels, the right-hand one included, are drawn whole
        box = text.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, text
    assert [t.get_text() for t in ax.texts] == [p.label for p in pts]


def test_ci_is_an_error_bar_and_the_front_is_drawn(tmp_path: Path) -> None:
    pts = [
        Point(label="a", x=1.0, y=0.4, y_low=0.2, y_high=0.6),
        Point(label="b", x=2.0, y=0.8, y_low=0.7, y_high=0.9),
        Point(label="c", x=3.0, y=0.5),
        Point(label="d", x=None, y=0.9),
    ]
    assert pareto_front([(1.0, 0.4), (2.0, 0.8), (3.0, 0.5)]) == [(1.0, 0.4), (2.0, 0.8)]
    fig = pareto_plot(pts, "latency", "accuracy", "t")
    ax = fig.axes[0]
    bars = [c for c in ax.containers if c.has_yerr]
    segs = [seg for c in bars for seg in c.lines[2][0].get_segments()]
    assert sorted((round(s[0][1], 3), round(s[1][1], 3)) for s in segs) == [(0.2, 0.6), (0.7, 0.9)]
    assert any(line.get_label() == "Pareto front" for line in ax.lines)
    assert "not measured: d" in [t.get_text() for t in fig.texts]
    svg = figure_svg(fig)
    assert svg.startswith("<svg") and not re.search(r'(href|src)="(https?:)?//', svg)  # nothing to fetch
    files = save_figure(fig, tmp_path, "p")
    assert [f.suffix for f in files] == [".svg", ".pdf", ".png"] and all(f.stat().st_size > 1000 for f in files)
