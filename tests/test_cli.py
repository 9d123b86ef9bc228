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


def _readme_first_bench() -> list[str]:
    """The `rig bench ...` of the README's first command, as a new user copies it."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    first = block.strip().splitlines()[0].split("#", 1)[0]
    m = re.search(r"&& (rig bench[^&]*)", first)
    assert m, f"README's first command has no `rig bench`: {first}"
    return shlex.split(m.group(1))[1:]


@pytest.mark.model
def test_readme_first_bench_runs_all_five_benchmarks_offline(tmp_path, helsinki_pack, embedded_weights) -> None:
    """The README's first `rig bench` (limit 1 here), inside `unshare -n` where the machine allows it: every
    benchmark runs (none skipped for a missing extra), llama.cpp's native logs stay off the terminal and in the run's
    engine.log, and the run ends with one screen of a row per benchmark."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from rig.runs.manifest import RunManifest

    repo = Path(__file__).resolve().parents[1]
    args = _readme_first_bench()
    assert args[:1] == ["bench"] and "--benchmark" not in args and "-b" not in args
    cmd = [sys.executable, "-m", "rig.cli", *args, "--limit", "1", "--out", str(tmp_path / "runs")]
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        cmd = ["unshare", "-n", "bash", "-c", "ip link set lo up && exec \"$@\"", "bash", *cmd]
    env = os.environ | {"PYTHONPATH": str(repo), "COLUMNS": "100"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipped" not in r.stderr, r.stderr
    (run,) = (tmp_path / "runs").iterdir()
    names = [b.name for b in RunManifest.read(run).config.benchmarks]
    assert names == ["callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"]
    assert "llama_" not in r.stderr + r.stdout  # native logs went to the run folder instead
    assert "llama_" in (run / "engine.log").read_text(encoding="utf-8")
    assert len(r.stdout.splitlines()) <= 40, r.stdout
    for name in names:
        assert any(line.split()[:1] == [name] for line in r.stdout.splitlines()), (name, r.stdout)
    assert (run / "report.md").is_file() and (run / "report.html").is_file()
