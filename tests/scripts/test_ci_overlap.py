"""scripts/ci_overlap.py keeps CI's own whole-run times apart from this host's stage timings: `--ci` records one,
`--render` lists them in their own table and leaves them out of the host's medians."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.scripts import SCRIPTS, load_script

SCRIPT = SCRIPTS / "ci_overlap.py"


def _host_row(mode: str, total_s: float) -> dict:
    stage = {"wall_s": total_s, "rc": 0, "pytest": "1 passed"}
    return {"mode": mode, "started": "2026-01-01 00:00", "load_before": 0.1, "main": stage, "vllm": stage,
            "total_s": total_s}  # fmt: skip


def test_ci_rows_get_their_own_table_and_stay_out_of_the_medians() -> None:
    rows = [
        _host_row("in-turn", 600.0),
        _host_row("side-by-side", 480.0),
        {"source": "ci", "mode": "in-turn", "total_s": 2505.0, "note": "stop 43"},
    ]
    md = load_script("ci_overlap").render(rows)
    assert "10.0 min in turn, 8.0 min side by side" in md  # the CI run's 2505 s is not in the host's median
    assert "| in-turn | stop 43 | 41.8 |" in md
    assert md.count("| in-turn |") == 2  # one host row, one CI row


def test_ci_records_a_row_and_refuses_an_unknown_mode_or_a_non_number(tmp_path: Path) -> None:
    jsonl, out = tmp_path / "t.jsonl", tmp_path / "t.md"
    files = ["--jsonl", str(jsonl), "--out", str(out)]
    ok = subprocess.run([sys.executable, SCRIPT, "--ci", "side-by-side", "2185", "--ci-note", "stop 44", *files])
    assert ok.returncode == 0
    assert json.loads(jsonl.read_text()) == {"source": "ci", "mode": "side-by-side", "total_s": 2185.0,
                                             "note": "stop 44"}  # fmt: skip
    assert "| side-by-side | stop 44 | 36.4 |" in out.read_text()
    bad = subprocess.run([sys.executable, SCRIPT, "--ci", "sideways", "1", *files], capture_output=True, text=True)
    assert bad.returncode != 0 and "sideways" in bad.stderr
    nan = subprocess.run([sys.executable, SCRIPT, "--ci", "in-turn", "nan", *files], capture_output=True, text=True)
    assert nan.returncode != 0 and "'nan'" in nan.stderr and "Traceback" not in nan.stderr
    assert len(jsonl.read_text().splitlines()) == 1
