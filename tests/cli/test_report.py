"""`rig report` prints its markdown through `printable`: text a run folder holds (a model name, a run id) reaches
the terminal with its escape sequences shown, never acted on (issue 51); report.md keeps it as stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from rig.cli import app

OLD_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "run_before_issue17"
HOSTILE = "gemma\x1b[2J\x1b]0;owned\x07\u202eevil"


def hostile_run(where: Path) -> Path:
    """The five-benchmark run, its model named with a screen clear, a title escape and a bidi override."""
    shutil.copytree(OLD_RUN, where)
    man = json.loads((where / "manifest.json").read_text())
    man["config"]["model"]["name"] = HOSTILE
    (where / "manifest.json").write_text(json.dumps(man))
    return where


def test_report_markdown_on_the_terminal_carries_no_escape(tmp_path: Path) -> None:
    run = hostile_run(tmp_path / "run")
    r = CliRunner().invoke(app, ["report", str(run)])
    assert r.exit_code == 0, r.output
    assert "gemma\\x1b[2J\\x1b]0;owned\\x07\\u202eevil" in r.stdout
    assert not any(c in r.stdout for c in "\x1b\x07\u202e")
    assert HOSTILE in (run / "report.md").read_text()  # the file is the record; only the terminal is guarded
