"""`rig load` flags: bad input is exit 2 with one line naming the flag and the item, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.cli import app

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--slo", "ttft_p95=fast"], "--slo 'ttft_p95=fast': 'fast' is not a duration"),
        (["--slo", "tps_p95=2s"], "--slo 'tps_p95=2s': expected KEY=DURATION"),
        (["-c", "2,4"], "--concurrency '2,4': the first level must be 1"),
        (["-c", "1,two"], "--concurrency '1,two': 'two' is not a whole number"),
        # RunSpec's words, as `rig bench` and `rig compare` give them (tests/cli/test_common.py)
        (["-c", "1,2", "--decode", "xml"], "--decode 'xml': Input should be 'none', 'json' or 'yaml'"),
        (
            ["-c", "1,2", "--tool-mode", "xml"],
            "--tool-mode 'xml': Input should be 'native', 'prompt', 'json' or 'yaml'",
        ),
        # the embedded model's in-process llama.cpp serves one request at a time: level 2 could not be reached
        (["-c", "1,2"], "--concurrency 2: model 'gemma3-270m' (engine llamacpp) serves at most 1 request(s)"),
        # out of range: refused here, not by the level's own process after the levels before it ran (issue 37)
        (["-c", "1,2,2000"], "--concurrency '1,2,2000': 2000 is above 1024"),
        (["-c", "1," + "9" * 5000], "is not a whole number"),
        (["--slo", "e2e_p95=" + "9" * 400 + "m"], "the limit must be at most 86400 s"),
        (["--slo", "e2e_p95=99999999s"], "the limit must be at most 86400 s"),
        (["-c", "1,2", "--max-tokens", "1000000000000"], "--max-tokens 1000000000000: Input should be less than"),
    ],
)
def test_bad_flags_exit_2_with_one_line(flags: list[str], words: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["load", "--models", str(REPO / "models.yaml"), "--out", str(out), *flags])
    assert r.exit_code == 2, r.output
    assert words in " ".join(r.output.split())
    assert "Traceback" not in r.output
    assert not out.exists()  # nothing was written


@pytest.mark.parametrize(
    ("levels", "runs", "says"),
    [
        ([2, 1], {}, "settings.levels: Value error, list the levels in ascending order"),  # ran 2 then 1
        ([], {}, "settings.levels: Value error, the first level must be 1"),  # was an IndexError
        ([0, 1], {}, "settings.levels: Value error, 0 is outside 1..1024"),
        ([1, 5000], {}, "settings.levels: Value error, 5000 is outside 1..1024"),
        ([1, 2], {"1": "../../x"}, "runs.1: '../../x' has a path separator"),
        ([1, 2], {"3": "r3"}, "runs: level 3 is not one of the load's levels [1, 2]"),
    ],
    ids=["descending", "none", "zero", "too-many", "outside", "unknown-level"],
)
def test_a_resume_plan_the_flags_would_refuse_is_refused_before_anything_runs(
    levels: list[int], runs: dict[str, str], says: str, tmp_path: Path
) -> None:
    import json

    ldir = tmp_path / "load-1"
    ldir.mkdir()
    settings = {"bench": {"model": "gemma3-270m", "benchmark": "callnavi", "models_file": str(REPO / "models.yaml")}}
    plan = {"format_version": 1, "settings": settings | {"levels": levels}, "runs": runs}
    (ldir / "plan.json").write_text(json.dumps(plan))
    r = CliRunner().invoke(app, ["load", "--resume", "load-1", "--out", str(tmp_path)])
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and f"{ldir / 'plan.json'}: " in said and says in said, r.output
    assert "Traceback" not in said
    assert sorted(p.name for p in ldir.iterdir()) == ["plan.json"]  # no level ran
