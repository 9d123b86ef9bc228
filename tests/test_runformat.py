"""Run folders carry format versions: runs written before versions existed still read; newer ones are refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.cli import app
from rig.render.export import list_runs
from rig.render.report import report_markdown
from rig.runfolder.manifest import RunManifest
from rig.runfolder.store import Store
from rig.runformat import MANIFEST_FORMAT, RESULTS_SCHEMA_VERSION, NewerFormatError, read_results
from tests.render.test_report import make_run


def _user_version(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA user_version").fetchone()[0]
    finally:
        con.close()


def _set_manifest_format(run_dir: Path, version: int | None) -> None:
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text())
    data.pop("format_version", None)
    if version is not None:
        data["format_version"] = version
    path.write_text(json.dumps(data))


def _set_user_version(db: Path, version: int) -> None:
    con = sqlite3.connect(db)
    try:
        con.execute(f"PRAGMA user_version = {version}")
    finally:
        con.close()


def test_new_runs_record_both_versions(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=4)
    assert json.loads((run_dir / "manifest.json").read_text())["format_version"] == MANIFEST_FORMAT
    assert _user_version(run_dir / "results.sqlite") == RESULTS_SCHEMA_VERSION


def test_a_run_written_before_versions_reads_as_version_1(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=4)
    expected = report_markdown(run_dir)
    _set_manifest_format(run_dir, None)
    _set_user_version(run_dir / "results.sqlite", 0)  # SQLite's default: what rig wrote before versions
    assert RunManifest.read(run_dir).format_version == 1
    assert len(read_results(run_dir / "results.sqlite")) == 4
    assert report_markdown(run_dir) == expected
    assert _user_version(run_dir / "results.sqlite") == 0  # reading an old run does not rewrite it
    r = CliRunner().invoke(app, ["report", str(run_dir)])
    assert r.exit_code == 0, r.output


def test_a_newer_manifest_is_refused_naming_the_file(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=2)
    _set_manifest_format(run_dir, MANIFEST_FORMAT + 2)
    with pytest.raises(NewerFormatError) as e:
        RunManifest.read(run_dir)
    assert str(e.value) == (
        f"{run_dir / 'manifest.json'} was written by a newer rig "
        f"(format {MANIFEST_FORMAT + 2}; this rig reads up to {MANIFEST_FORMAT}): upgrade rig"
    )
    assert list_runs(tmp_path) == []  # `rig runs` lists only runs it can read


def test_a_newer_results_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=2)
    db = run_dir / "results.sqlite"
    _set_user_version(db, RESULTS_SCHEMA_VERSION + 1)
    before = db.read_bytes()
    with pytest.raises(
        NewerFormatError,
        match=r"results\.sqlite was written by a newer rig \(format 2; this rig "
        r"reads up to 1\): upgrade rig",
    ):
        Store(db)
    with pytest.raises(NewerFormatError):
        read_results(db)
    assert db.read_bytes() == before and not (run_dir / "results.sqlite-wal").exists()


@pytest.mark.parametrize("newer", ["manifest", "results"])
@pytest.mark.parametrize("command", ["report", "export", "resume"])
def test_cli_exits_2_on_a_newer_run(tmp_path: Path, command: str, newer: str) -> None:
    run_dir = make_run(tmp_path, n_eps=2)
    if newer == "manifest":
        _set_manifest_format(run_dir, MANIFEST_FORMAT + 1)
        name = "manifest.json"
    else:
        _set_user_version(run_dir / "results.sqlite", RESULTS_SCHEMA_VERSION + 1)
        name = "results.sqlite"
    args = {
        "report": ["report", str(run_dir)],
        "export": ["export", str(run_dir)],
        "resume": ["bench", "--resume", run_dir.name, "--out", str(run_dir.parent)],
    }[command]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "was written by a newer rig" in r.output and name in r.output.replace("\n", "")


def test_storage_error_tells_a_full_disk_from_other_errors(tmp_path: Path) -> None:
    import errno

    from rig.runformat import storage_error

    full = storage_error(OSError(errno.ENOSPC, "No space left on device"), tmp_path)
    assert full is not None and str(full).startswith(f"no space left on {tmp_path}")
    assert str(storage_error(sqlite3.OperationalError("database or disk is full"), tmp_path)).startswith("no space")
    # an I/O error with space to spare is named as what it is, not as a full disk
    io = storage_error(sqlite3.OperationalError("disk I/O error"), tmp_path)
    assert io is not None and str(io).startswith(f"{tmp_path}: disk I/O error")
    assert storage_error(OSError(errno.EACCES, "Permission denied"), tmp_path) is None
    assert storage_error(sqlite3.OperationalError("no such table: x"), tmp_path) is None
