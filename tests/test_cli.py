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
