"""CLI flag resolution that does not need a model."""

import pytest
import typer
from typer.testing import CliRunner

from rig.cli import _tool_mode, app


def test_decode_also_constrains_tool_calls_unless_tool_mode_is_given() -> None:
    assert _tool_mode(None, "json") == "json" and _tool_mode(None, "yaml") == "yaml"
    assert _tool_mode(None, "none") == "prompt"
    assert _tool_mode("native", "json") == "native" and _tool_mode("prompt", "yaml") == "prompt"
    with pytest.raises(typer.Exit):
        _tool_mode("xml", "none")


def test_bad_tool_mode_exits_2_naming_the_flag() -> None:
    r = CliRunner().invoke(app, ["bench", "--tool-mode", "xml"])
    assert r.exit_code == 2 and "--tool-mode 'xml'" in r.output


def test_format_on_a_benchmark_without_one_is_refused() -> None:
    r = CliRunner().invoke(app, ["bench", "-b", "routeeval", "--format", "yaml"])
    assert r.exit_code == 2 and "CallNavi's answer format" in r.output


def test_messages_with_square_brackets_print_as_written() -> None:
    # rich reads "[mobility]" as a markup tag and drops it unless the message is escaped
    r = CliRunner().invoke(app, ["bench", "-O", "pip install 'rig[mobility]'"])
    assert r.exit_code == 2 and "'rig[mobility]'" in r.output


def test_library_messages_keep_their_brackets() -> None:
    from rich.console import Console

    from rig.cli import say

    console = Console(record=True, width=200)
    say("skipped mobilitybench: needs pip install 'rig[mobility]' ([bold]x[/bold])", console)
    assert "pip install 'rig[mobility]' ([bold]x[/bold])" in console.export_text()


def test_final_screen_has_a_row_per_benchmark_within_40_lines(tmp_path) -> None:
    import shutil
    from pathlib import Path

    from rich.console import Console

    from rig.cli import print_screen
    from rig.runs.screen import run_summaries

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "runs" / "fixtures" / "run_before_issue17", run)
    console = Console(record=True, width=80)
    print_screen(run, console)
    text = console.export_text()
    assert len(text.splitlines()) <= 40
    _man, sums = run_summaries(run)
    assert [s.benchmark for s in sums] == ["callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"]
    for s in sums:  # each row shows its RunSummary's numbers, not recomputed ones
        assert s.benchmark[:8] in text and f"{s.e2e_p50_s:.2f} s" in text
    assert "report.md" in text and "--html" in text
