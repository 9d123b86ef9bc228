"""Report figures: rates on a fixed 0-1 axis, costs from 0, CIs as error bars, every label inside the frame."""

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from rig.render.plots import Point, figure_bytes, figure_svg, pareto_front, pareto_plot, save_figure


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


def test_histogram_counts_per_bin_and_names_its_bars() -> None:
    from rig.render.plots import histogram_plot

    # 20 bins over 1.0-3.0 (0.1 wide): 1.0 in bin 0, 1.25 in bin 2, 3.0 closes the last bin
    fig = histogram_plot([1.0, 1.0, 1.25, 3.0, 3.0, 3.0], "latency", "seconds")
    ax = fig.axes[0]
    assert ax.get_gid() == "histogram:latency"
    heights = [p.get_height() for p in ax.patches]
    assert heights == [2, 0, 1] + [0] * 16 + [3]
    assert [p.get_gid() for p in ax.patches][:3] == ["bin0:2", "bin1:0", "bin2:1"]
    assert ax.get_xlim()[0] == 0  # from 0, not from the fastest reply
    svg = figure_svg(fig)
    assert re.findall(r'id="f[0-9a-f]+-bin(\d+):(\d+)"', svg)[-1] == ("19", "3")


def test_integer_histogram_has_one_bar_per_value() -> None:
    from rig.render.plots import histogram_plot

    fig = histogram_plot([5, 5, 7, 9, 9, 9], "tokens", "tokens", integer=True)
    ax = fig.axes[0]
    assert [(p.get_x(), p.get_height()) for p in ax.patches] == [(4.5, 2), (5.5, 0), (6.5, 1), (7.5, 0), (8.5, 3)]
    # a bar for 0 tokens is drawn whole, not cut at the axis
    zero = histogram_plot([0, 1, 1], "tokens", "tokens", integer=True)
    assert zero.axes[0].get_xlim()[0] == -0.5
    # a span wider than the bins falls back to 20 equal bins
    assert len(histogram_plot(list(range(100)), "tokens", "tokens", integer=True).axes[0].patches) == 20


def test_no_data_is_a_sentence_not_an_empty_plot() -> None:
    from rig.render.plots import histogram_plot, line_plot

    for fig in (
        histogram_plot([], "Time to first token", "seconds", why="none of the 4 replies recorded one"),
        line_plot([1.0], [2.0], "Time to first token", "seconds", "GiB", why="none of the 4 replies recorded one"),
    ):
        assert not fig.axes  # no axes whose empty frame could read as zero
        assert [t.get_text() for t in fig.texts] == [
            "Time to first token: not measured (none of the 4 replies recorded one)"
        ]
        assert "not measured (none of the 4 replies recorded one)" in figure_svg(fig)


def test_labels_of_equal_scores_do_not_overlap() -> None:
    # rig compare's decode comparison: both variants at 0.0, the long labels meet in the middle of the plot.
    pts = [
        Point(label="gemma3-270m@decode=none,tool_mode=prompt", x=20.6, y=0.0, y_low=0.0, y_high=0.0),
        Point(label="gemma3-270m@decode=json,tool_mode=json", x=4.7, y=0.0, y_low=0.0, y_high=0.0),
        Point(label="gemma3-270m@decode=yaml,tool_mode=yaml", x=12.0, y=0.0, y_low=0.0, y_high=0.0),
    ]
    fig = pareto_plot(pts, "latency p50 (s)", "accuracy", "Accuracy against latency")
    renderer = _render(fig)
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts]
    assert len(boxes) == 3
    for i, a in enumerate(boxes):
        assert not any(a.overlaps(b) for b in boxes[i + 1 :]), [t.get_text() for t in fig.axes[0].texts]
    frame = fig.bbox
    for box in boxes:
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


def test_a_label_moved_off_its_point_is_tied_to_it_by_a_leader() -> None:
    # rig compare of five quantizations: three variants at the same score and nearly the same memory, whose stacked
    # labels had read as belonging to the wrong points.
    pts = [
        Point(label=f"qwen2.5-coder-1.5b-{q}", x=x, y=0.15, y_low=0.08, y_high=0.22)
        for q, x in (("q4_k_m", 2.42), ("q4_0", 2.47), ("q8_0", 2.56))
    ]
    fig = pareto_plot(pts, "process RSS peak (GiB)", "headline score", "Score against memory")
    ax = fig.axes[0]
    renderer = _render(fig)
    leaders = {line.get_gid(): line for line in ax.lines if str(line.get_gid()).startswith("leader:")}
    moved = [t for t in ax.texts if t.xyann not in ((8, 8), (-8, 8), (8, -8), (-8, -8))]
    assert moved, "the equal scores should have stacked some labels"
    for t in moved:
        line = leaders[f"leader:{t.get_text()}"]
        (x0, y0), (x1, y1) = line.get_xydata()
        assert (x0, y0) == pytest.approx(t.xy)  # starts at its own point
        end = ax.transData.transform((x1, y1))
        box = t.get_window_extent(renderer).expanded(1.01, 1.01)
        assert box.contains(*end)  # and ends on its own label
    assert len(leaders) == len(moved)


def test_bars_carry_their_values_so_zero_is_not_missing() -> None:
    from rig.render.plots import bar_plot

    fig = bar_plot(
        ["a", "b", "c"], [0.0, 0.95, None], "Headline", "score", rate=True, low=[0.0, 0.9, None], high=[0.0, 1.0, None]
    )
    texts = {t.get_gid(): t.get_text() for t in fig.axes[0].texts}
    assert texts["value:0"] == "0.00" and texts["value:1"] == "0.95" and "value:2" not in texts
    assert "not measured" in texts.values()
    renderer = _render(fig)
    frame = fig.axes[0].get_window_extent(renderer)
    for t in fig.axes[0].texts:
        box = t.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, t.get_text()


def test_histogram_of_one_value_stays_at_or_above_zero() -> None:
    from rig.render.plots import histogram_plot

    for value in (0.0, 3.0):
        ax = histogram_plot([value] * 8, "latency", "seconds").axes[0]
        assert ax.get_xlim()[0] >= 0 and ax.get_xlim()[1] > value
        assert [b.get_gid() for b in ax.patches] == ["bin0:8"]


def test_labels_of_top_scores_stay_inside_the_axes_clear_of_the_title() -> None:
    pts = [
        Point(label="gemma3-270m (none/prompt) #1", x=0.0, y=1.0, y_low=1.0, y_high=1.0),
        Point(label="gemma3-270m (json/json) #2", x=0.0, y=0.75, y_low=0.5, y_high=1.0),
    ]
    fig = pareto_plot(pts, "latency p50 (s)", "score", "Score against latency")
    renderer = _render(fig)
    axes = fig.axes[0].get_window_extent(renderer)
    for text in fig.axes[0].texts:
        box = text.get_window_extent(renderer)
        assert axes.y0 <= box.y0 and box.y1 <= axes.y1, text.get_text()


def test_load_plot_leaves_unmeasured_levels_out_and_names_them() -> None:
    from rig.render.plots import load_plot

    fig = load_plot(
        [1, 4, 16],
        [(0.5, 0.3, 0.7), (None, None, None), (0.25, 0.1, 0.4)],
        {"TTFT p95": [0.2, 0.9, None], "E2E p95": [1.0, 2.0, 6.0]},
        "m on b",
    )
    score, latency = fig.axes
    assert score.get_ylim()[0] < 0 < 1 < score.get_ylim()[1]  # a rate on the 0-1 axis
    assert latency.get_ylim()[0] == 0  # latency from 0
    assert score.get_xscale() == "log"  # 1..16: doubling levels spaced evenly
    svg = figure_bytes(fig, "svg").decode()
    assert 'id="score:1"' in svg and 'id="score:16"' in svg and 'id="score:4"' not in svg  # no point drawn at 0
    ttft = next(line for line in latency.lines if line.get_label() == "TTFT p95")
    assert list(ttft.get_xdata()) == [1, 4]
    assert "not measured: score at 4, TTFT p95 at 16" in " ".join(t.get_text() for t in fig.texts)


def test_the_same_figure_renders_the_same_bytes() -> None:
    """Two figures of the same numbers give the same SVG (ids from the content, a fixed clip-path salt), so a run's
    report.html is the same file each time it is rendered and an export need not send it again."""
    pytest.importorskip("matplotlib")
    from rig.render.plots import figure_bytes, figure_svg, line_plot

    a = line_plot([1.0, 2.0, 3.0], [0.5, 0.25, 0.125], "t", "x", "y")
    b = line_plot([1.0, 2.0, 3.0], [0.5, 0.25, 0.125], "t", "x", "y")
    assert figure_svg(a) == figure_svg(b)
    assert figure_bytes(a, "svg") == figure_bytes(b, "svg")
    assert figure_svg(line_plot([1.0, 2.0], [0.5, 0.5], "t", "x", "y")) != figure_svg(a)
