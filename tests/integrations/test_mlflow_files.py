"""What an export takes from a folder: only the regular files inside it. A symbolic link in a run folder (figures/,
report.md, figures/ itself) or a group folder is refused naming it before the tracking store is touched; a load
folder's plan.json is read bounded and its runs must be folders under its runs/ (issue 51)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("mlflow")

FIVE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"


def rig_export(folder: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`rig export FOLDER --mlflow sqlite:///...` (a local store: no server), under a timeout."""
    argv = [sys.executable, "-m", "rig.cli", "export", str(folder), "--mlflow", f"sqlite:///{cwd / 'm.db'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """The five-benchmark run with its report files, as `rig report` leaves them."""
    folder = tmp_path / "run"
    shutil.copytree(FIVE, folder)
    (folder / "report.html").write_text("<html></html>")
    (folder / "figures").mkdir()
    (folder / "figures" / "latency.svg").write_text("<svg/>")
    return folder


@pytest.mark.parametrize("link", ["figures/secret.svg", "figures", "report.md"])
def test_a_link_in_a_run_folder_is_refused_and_nothing_is_sent(link: str, run: Path, tmp_path: Path) -> None:
    """It was followed: the linked file went to the tracking store. Now the export is refused naming the link, and
    the store is never opened (no m.db, no mlruns/)."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "secret.svg").write_text("<svg>the lab's private notes</svg>")
    target = run / link
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    target.symlink_to(secret if link == "figures" else secret / "secret.svg")
    work = tmp_path / "work"
    work.mkdir()
    r = rig_export(run, work)
    text = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2, text
    assert f"{target}: is a symbolic link; rig exports only the files inside {run}" in text and "Traceback" not in text
    assert list(work.iterdir()) == []


def test_a_group_folders_own_figure_that_is_a_link_is_refused(tmp_path: Path) -> None:
    from rig.integrations.mlflow import MlflowExportError, compare_group

    cdir = tmp_path / "cmp"
    cdir.mkdir()
    (cdir / "compare.md").write_text("# rig compare\n")
    (tmp_path / "elsewhere.png").write_bytes(b"\x89PNG")
    (cdir / "pareto.png").symlink_to(tmp_path / "elsewhere.png")
    with pytest.raises(MlflowExportError, match=rf"{cdir / 'pareto.png'}: is a symbolic link"):
        compare_group(cdir, [FIVE, FIVE])


def _load_folder(tmp_path: Path, runs: dict[str, str]) -> Path:
    ldir = tmp_path / "load-1"
    (ldir / "runs").mkdir(parents=True)
    settings = {"bench": {"model": "gemma3-270m", "benchmark": "callnavi"}, "levels": [1, 2]}
    (ldir / "plan.json").write_text(json.dumps({"format_version": 1, "settings": settings, "runs": runs}))
    return ldir


def test_a_load_plan_naming_a_run_outside_its_folder_is_refused(tmp_path: Path) -> None:
    """`runs` named `../../run`: that run was exported as one of the load's levels."""
    shutil.copytree(FIVE, tmp_path / "run")
    ldir = _load_folder(tmp_path, {"1": "../../run", "2": "r2"})
    work = tmp_path / "work"
    work.mkdir()
    r = rig_export(ldir, work)
    text = " ".join((r.stdout + r.stderr).split())
    assert (
        r.returncode == 2 and f"{ldir / 'plan.json'}: " in text and "runs.1: '../../run' has a path separator" in text
    )
    assert "Traceback" not in text and list(work.iterdir()) == []


def test_a_huge_load_plan_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    """A 600 MB plan.json took 5.6 GB of memory to read whole; now the bounded reader refuses it by its size."""
    ldir = _load_folder(tmp_path, {})
    with open(ldir / "plan.json", "r+b") as f:
        f.truncate(600 << 20)  # sparse: no disk used
    work = tmp_path / "work"
    work.mkdir()
    r = rig_export(ldir, work)
    text = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2 and f"{ldir / 'plan.json'}" in text and "Traceback" not in text, text
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(("levels", "says"), [([2, 1], "ascending"), ([], "must be 1"), ([1, 5000], "outside 1..")])
def test_a_load_plan_with_levels_the_flag_refuses_is_refused(levels: list[int], says: str, tmp_path: Path) -> None:
    from rig.inputs import InputError
    from rig.integrations.mlflow import load_group

    ldir = _load_folder(tmp_path, {})
    plan = json.loads((ldir / "plan.json").read_text())
    plan["settings"]["levels"] = levels
    (ldir / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(InputError, match=f"settings.levels: .*{says}"):
        load_group(ldir)
