"""The one-screen summary at the widths terminals and CI logs have, from the recorded fixture run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console

from rig.benchmarks.base import Table
from rig.cli import print_screen
from rig.render.screen import column_widths, final_screen, run_summaries

FIXTURE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "run")
    return tmp_path / "run"


def _render(run: Path, width: int) -> tuple[list[str], list[str], set[str]]:
    """The table's lines, the lines under it (paths, printed whole) and every word the screen was built from."""
    console = Console(record=True, width=width)
    print_screen(run, console)
    text = console.export_text().splitlines()
    table, lines = final_screen(run, width)
    source = [table.title, *table.columns, table.note or "", *lines, *(str(c) for r in table.rows for c in r)]
    return text[: len(text) - len(lines)], text[len(text) - len(lines) :], {w for s in source for w in s.split()}


def _row_lines(table_lines: list[str], benchmark: str) -> list[str]:
    """A benchmark's row: its first line and the lines its wrapped cells continue on."""
    start = next(i for i, line in enumerate(table_lines) if line.startswith(benchmark + " "))
    rest = table_lines[start + 1 :]
    end = next((i for i, line in enumerate(rest) if not line.startswith(" ")), len(rest))
    return [table_lines[start], *rest[:end]]


def test_at_80_columns_no_word_is_split_and_each_value_stays_on_its_line(run: Path) -> None:
    table_lines, lines, source = _render(run, 80)
    assert all(len(line) <= 80 for line in table_lines)
    for line in table_lines:  # a word cut at the edge of its column ("reasonin" / "g") is no word of the screen's
        assert {w for w in line.split() if set(w) != {"─"}} <= source, line
    _man, sums = run_summaries(run)
    for s in sums:
        first = _row_lines(table_lines, s.benchmark or "all")[0]
        h = s.headline
        assert h is not None
        ci = f"{h.mean:.2f} [{h.low:.2f},{h.high:.2f}]" if h.mean is not None else f"{h.scores[0].score:.2f} (n=1)"
        assert ci in first  # the compact CI, whole on the row's first line
        assert f"{s.e2e_p50_s:.2f}" in first and f"RSS {s.peak_rss_bytes / 2**30:.2f}" in first  # type: ignore[operator]
    header = " ".join(table_lines[1:3])
    assert "(s)" in header and "(GiB)" in header  # units in the header, numbers alone in the cells
    assert " s " not in " ".join(table_lines[3:]) and "GiB" not in " ".join(table_lines[3:])
    # what each headline measures and who judged it, in the note under the table when the row has no room
    assert "urbangeo MCQ / reasoning score (judge: gemma3-270m, self-judged)" in " ".join(" ".join(table_lines).split())
    assert any("report.md" in line for line in lines) and any("--html" in line for line in lines)
    assert all(str(run) in line for line in lines)  # paths printed whole, for copying, whatever the width


def test_at_120_columns_each_row_says_what_its_headline_is(run: Path) -> None:
    table_lines, _lines, source = _render(run, 120)
    assert all(len(line) <= 120 for line in table_lines)
    for line in table_lines:
        assert {w for w in line.split() if set(w) != {"─"}} <= source, line
    assert "headline is" in table_lines[1] or "headline is" in table_lines[0]
    _man, sums = run_summaries(run)
    for s in sums:
        row = _row_lines(table_lines, s.benchmark or "all")
        name = {"callnavi": "AST match (routing: EM)", "evgeoqa": "Hits@1", "mobilitybench": "final pass rate"}
        name |= {"routeeval": "route accuracy", "urbangeo": "MCQ / reasoning score"}
        assert name[s.benchmark or ""] in row[0]
        assert f"{s.e2e_p50_s:.2f}" in row[0]
        # a row wraps only in its wordy column: one line but for the judge's words
        assert len(row) <= (1 if s.headline is None or s.headline.source is None else 3)
    urbangeo = " ".join(_row_lines(table_lines, "urbangeo"))
    assert "(judge:" in urbangeo and "self-judged)" in urbangeo
    assert "headline is:" not in " ".join(table_lines)  # not repeated in the note


def test_at_160_columns_every_row_is_one_line(run: Path) -> None:
    table_lines, _lines, _source = _render(run, 160)
    for benchmark in ("callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"):
        assert len(_row_lines(table_lines, benchmark)) == 1


def test_a_terminal_too_narrow_for_any_layout_still_shows_every_benchmark(run: Path) -> None:
    console = Console(record=True, width=50)
    print_screen(run, console)
    text = console.export_text()
    for benchmark in ("callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"):
        assert benchmark in text


def test_column_widths_give_each_column_its_longest_word_and_the_rest_to_the_wordy_one() -> None:
    table = Table(
        title="t",
        columns=["name", "what it is", "latency p50 (s)"],
        rows=[["a", "a rather long description of the score", "1.25"]],
    )
    assert column_widths(table, 200) == [4, 38, 15]  # everything on one line
    widths = column_widths(table, 40)
    assert widths is not None and sum(widths) == 40 - 2 * 2
    assert widths[0] == 4 and widths[2] == 15  # the header stays whole; the description wraps
    assert widths[1] >= len("description")
    assert column_widths(table, 4 + 11 + 7 + 4 - 1) is None  # not even the longest words fit
