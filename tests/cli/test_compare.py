"""`rig compare` flags: --top-k reaches the divergence pass's settings; bad values exit 2 naming the flag, before
anything runs or is written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from rig.analyses.divergence.records import DivergenceSettings
from rig.cli import app

REPO = Path(__file__).resolve().parents[2]
OLD_RUN = REPO / "tests" / "fixtures" / "run_before_issue17"


def test_top_k_flag_is_declared_by_the_divergence_settings() -> None:
    cmd = typer.main.get_command(app).commands["compare"]  # type: ignore[attr-defined]
    (param,) = [p for p in cmd.params if "--top-k" in p.opts]
    field = DivergenceSettings.model_fields["top_k"]
    assert param.help == f"{field.description} Default {field.default}." and param.default is None
    assert "vLLM" in field.description and "lower bound" in field.description  # type: ignore[operator]


@pytest.mark.parametrize(
    ("k", "says"),
    [
        ("0", "--top-k 0: Input should be greater than or equal to 1"),
        ("5000", "--top-k 5000: Input should be less than or equal to 4096"),
    ],
)
def test_bad_top_k_exits_2_before_any_variant_runs(k: str, says: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["compare", "gemma3-270m", "--divergence", "--top-k", k, "--models", str(REPO / "models.yaml")]
    r = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert says in " ".join(r.output.split()) and "Traceback" not in r.output
    assert not out.exists()


@pytest.mark.parametrize("flag", [["--top-k", "5"], ["--reference", "gemma3-270m"]])
def test_divergence_flags_without_divergence_exit_2(flag: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["compare", "gemma3-270m", *flag, "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert f"{flag[0]} only applies with --divergence" in r.output and not out.exists()


def test_top_k_reaches_the_divergence_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass's process is stood in for: it records the settings file it was handed and stops (exit 2)."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for r in runs:
        shutil.copytree(OLD_RUN, r)
    handed: list[DivergenceSettings] = []

    def fake_pass(argv: list[str], stderr: Any = None) -> tuple[int, bool]:
        handed.append(DivergenceSettings.model_validate_json(Path(argv[-1]).read_text()))
        stderr.write(b"stood-in pass stopped\n")
        return 2, False

    import rig.analyses.divergence.run as pass_

    monkeypatch.setattr(pass_, "run_child", fake_pass)
    args = ["compare", "--run", str(runs[0]), "--run", str(runs[1]), "--divergence", "--top-k", "7"]
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "divergence: stood-in pass stopped" in r.output, r.output
    assert [s.top_k for s in handed] == [7]


@pytest.mark.parametrize("out", ["a-file", "under-a-file", "taken"])
def test_an_out_folder_that_cannot_be_had_is_named(tmp_path: Path, out: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rig compare --run` with --out a file, or a comparison folder another `rig compare --run` took the same
    second: before, a traceback (FileExistsError); now a named error, or for a name taken the next free one, claimed
    with one mkdir so that two commands never write into one folder (issue 37)."""
    import time

    runs = [tmp_path / "a", tmp_path / "b"]
    for r in runs:
        shutil.copytree(OLD_RUN, r)
    where = tmp_path / "out"
    if out == "a-file":
        where.write_text("not a folder")
    elif out == "under-a-file":
        (tmp_path / "file").write_text("x")
        where = tmp_path / "file" / "out"
    else:
        monkeypatch.setattr(time, "strftime", lambda *_: "20250101-000000")  # both commands in the same second
        (where / "compare-20250101-000000-callnavi").mkdir(parents=True)
    r = CliRunner().invoke(app, ["compare", "--run", str(runs[0]), "--run", str(runs[1]), "--out", str(where)])
    assert "Traceback" not in r.output and not isinstance(r.exception, OSError), r.output
    if out == "taken":
        assert r.exit_code == 0, r.output
        assert sorted(p.name for p in where.iterdir()) == [
            "compare-20250101-000000-callnavi",
            "compare-20250101-000000-callnavi-2",
        ]
        assert not any((where / "compare-20250101-000000-callnavi").iterdir())  # the other command's: untouched
        assert (where / "compare-20250101-000000-callnavi-2" / "compare.md").is_file()
    else:
        says = "exists and is not a folder" if out == "a-file" else "cannot create it (Not a directory)"
        assert r.exit_code == 2 and f"--out {where}: {says}" in " ".join(r.output.split()), r.output


def test_resume_refuses_flags_given_again_naming_them(tmp_path: Path) -> None:
    args = ["compare", "--resume", "compare-x", "--out", str(tmp_path), "--limit", "3", "--divergence"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "--resume compare-x: goes on with the comparison's recorded variants and settings; drop" in said
    assert "--limit" in said and "--divergence" in said and "Traceback" not in said
    r = CliRunner().invoke(app, ["compare", "--resume", "compare-x", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "plan.json: no such file" in " ".join(r.output.split()), r.output
    r = CliRunner().invoke(app, ["compare", "--resume", "../x", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "give a comparison id" in r.output, r.output


def _compare(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`rig compare` in a session of its own, as a terminal runs a command: a Ctrl-C reaches its process group."""
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "RIG_MODELS": str(REPO / "models.yaml")}
    argv = [sys.executable, "-m", "rig.cli", "compare", *args]
    pipe = subprocess.PIPE
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=True, start_new_session=True)


def _wait(what: Any, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, f"the command ended (exit {proc.returncode}) before it was stopped"
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


@pytest.mark.model
def test_a_stopped_divergence_comparison_resumes_without_rerunning_what_finished(
    tmp_path: Path, embedded_weights: str
) -> None:
    """SIGTERM to `rig compare --divergence` alone while its second variant runs, then Ctrl-C (SIGINT to the
    process group) during the divergence pass: each stop exits 130 with the command that resumes, and leaves no
    comparison or divergence file; the resume keeps the finished runs (not re-run), resumes the stopped one and runs
    the pass. Before, a SIGTERM killed the command and left its `rig bench` child running on; there was no resume."""
    import json
    import os
    import signal

    args = ["gemma3-270m", "--decode", "none,json", "--divergence", "--limit", "1", "-O", "task=routing"]
    proc = _compare(tmp_path, *args, "--max-tokens", "8", "--out", "runs")
    out = tmp_path / "runs"

    def second_run_started() -> bool:
        found = list(out.glob("compare-*/runs/*/manifest.json"))
        return len(found) == 2

    _wait(second_run_started, proc)
    (cdir,) = out.glob("compare-*")
    first = json.loads((cdir / "plan.json").read_text())["cells"][0]["run"]
    kept = (cdir / "runs" / first / "results.sqlite").stat().st_mtime_ns
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    hint = f"rig compare --resume {cdir.name} --out runs"  # as it was given
    assert proc.returncode == 130, err
    assert f"interrupted: gemma3-270m@decode=json stopped; finished variants are kept; resume with: {hint}" in err
    assert not (cdir / "compare.md").exists() and not list(cdir.glob("divergence*.json"))
    plan = json.loads((cdir / "plan.json").read_text())
    assert [c["run"] is not None for c in plan["cells"]] == [True, True]  # the stopped run is recorded to resume

    proc = _compare(tmp_path, "--resume", cdir.name, "--out", "runs")
    _wait(lambda: (cdir / "divergence-settings.json").exists(), proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"interrupted: the variants' runs are kept; resume with: {hint}" in err and "Traceback" not in err, err
    assert not (cdir / "compare.md").exists() and not (cdir / "divergence.json").exists()
    assert not list(cdir.glob("*.tmp"))

    proc = _compare(tmp_path, "--resume", cdir.name, "--out", "runs")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert f"== gemma3-270m@decode=none: finished before ({first})" in err
    assert "== gemma3-270m@decode=json: finished before" in err
    assert (cdir / "runs" / first / "results.sqlite").stat().st_mtime_ns == kept  # not re-run
    assert len(list((cdir / "runs").iterdir())) == 2
    md = (cdir / "compare.md").read_text()
    assert "## Token-level divergence against gemma3-270m@decode=none" in md
    assert "| gemma3-270m@decode=json,tool_mode=json | self | all |" in md


def _plan(cells: list[dict[str, Any]]) -> str:
    import json

    return json.dumps({"format_version": 1, "cells": cells})


def _cell(label: str, run: str | None = None) -> dict[str, Any]:
    return {"label": label, "spec": {"model": "gemma3-270m", "benchmark": "callnavi", "limit": 1}, "run": run}


@pytest.mark.parametrize(
    ("cells", "says"),
    [
        ([_cell("a", "../../x"), _cell("b")], "cells.0.run: Value error, '../../x' has a path separator"),
        ([_cell("a", "/tmp/x"), _cell("b")], "cells.0.run: Value error, '/tmp/x' has a path separator"),
        ([_cell("a", "r1"), _cell("b", "r1")], "cells: two variants name the same run"),  # a run compared with itself
        ([_cell("a"), _cell("a")], "cells: two variants have the same label"),
        ([], "cells: List should have at least 2 items"),
        ([_cell("x" * 100_000), _cell("b")], "cells.0.label: String should have at most 200 characters"),
        ([_cell("a", "r\x1b[2J"), _cell("b")], "has a control character"),
    ],
    ids=["parent", "absolute", "same-run", "same-label", "no-cells", "huge-label", "escape"],
)
def test_a_resume_plan_rig_would_not_write_is_refused_before_anything_runs(
    cells: list[dict[str, Any]], says: str, tmp_path: Path
) -> None:
    """plan.json is held to what `rig compare` writes: a run outside runs/, a run shared by two cells, no cells or a
    100 KB label (an OSError naming its spec folder) is refused naming the file and field; no variant runs."""
    cdir = tmp_path / "cmp"
    cdir.mkdir()
    (cdir / "plan.json").write_text(_plan(cells))
    r = CliRunner().invoke(app, ["compare", "--resume", "cmp", "--out", str(tmp_path)])
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and f"--resume cmp: {cdir / 'plan.json'}: " in said and says in said, r.output
    assert "Traceback" not in said and "\x1b" not in r.output
    assert sorted(p.name for p in cdir.iterdir()) == ["plan.json"]  # no runs/, no specs/


@pytest.mark.parametrize("case", ["no-benchmarks", "same-run"])
def test_a_refused_compare_of_runs_leaves_no_comparison_folder(case: str, tmp_path: Path) -> None:
    import json

    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        shutil.copytree(OLD_RUN, run)
    if case == "no-benchmarks":  # was an IndexError, after the comparison folder was made
        for run in runs:
            man = json.loads((run / "manifest.json").read_text())
            man["config"]["benchmarks"] = []
            (run / "manifest.json").write_text(json.dumps(man))
        says = f"{runs[0] / 'manifest.json'}: config.benchmarks: the run holds no benchmark to compare"
    else:
        runs[1] = runs[0].parent / "b" / ".." / "a"
        says = "the same run folder is given twice"
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["compare", "--run", str(runs[0]), "--run", str(runs[1]), "--out", str(out)])
    assert r.exit_code == 2 and says in " ".join(r.output.split()), r.output
    assert not out.exists() or not any(out.iterdir())


def test_compare_markdown_on_the_terminal_carries_no_escape(tmp_path: Path) -> None:
    from tests.cli.test_report import HOSTILE, hostile_run

    runs = [hostile_run(tmp_path / "a"), hostile_run(tmp_path / "b")]
    r = CliRunner().invoke(app, ["compare", "--run", str(runs[0]), "--run", str(runs[1]), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "# rig compare" in r.stdout and not any(c in r.stdout for c in "\x1b\x07\u202e")
    assert HOSTILE.split("\x1b")[0] in r.stdout


def test_temperature_reaches_every_variant_s_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pass^k needs repeats sampled above temperature 0: `--temperature` is one of compare's run settings, handed to
    each variant's run spec as `rig bench --temperature` would be."""
    import rig.analyses.compare_run as compare_run
    from rig.analyses.compare import cell_spec

    handed: list[Any] = []

    def stood_in(variants: list[Any], bo: Any, **_: Any) -> tuple[Path, list[Path]]:
        handed.extend(cell_spec(v, bo) for v in variants)
        raise typer.Exit(0)

    monkeypatch.setattr(compare_run, "run_compare", stood_in)
    r = CliRunner().invoke(
        app, ["compare", "gemma3-270m", "qwen2.5-coder-0.5b", "--temperature", "0.7", "-k", "3", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    assert [(s.model, s.temperature, s.repeats) for s in handed] == [
        ("gemma3-270m", 0.7, 3),
        ("qwen2.5-coder-0.5b", 0.7, 3),
    ]
    bad = CliRunner().invoke(app, ["compare", "gemma3-270m", "--temperature", "-1", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "temperature" in bad.output and not handed[2:]
