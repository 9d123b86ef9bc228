"""`rig report` and `rig export` on damaged run folders: read-only opening, the damaged file named, exit 2."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.cli import app
from rig.render.report import report_markdown
from tests.render.test_report import make_run


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def damage(run_dir: Path, how: str) -> Path:
    db = run_dir / "results.sqlite"
    if how == "missing":
        db.unlink()
    elif how == "empty":
        db.write_bytes(b"")
    elif how == "truncated":
        db.write_bytes(db.read_bytes()[: 4096 + 100])
    elif how == "random":
        db.write_bytes(os.urandom(8192))
    elif how == "not-rig":
        db.unlink()
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE other (x)")
        con.close()
    return db


@pytest.mark.parametrize("command", ["report", "export"])
@pytest.mark.parametrize("how", ["missing", "empty", "truncated", "random", "not-rig"])
def test_a_damaged_results_database_is_named_and_never_created(tmp_path: Path, command: str, how: str) -> None:
    run_dir = make_run(tmp_path, n_eps=6)
    db = damage(run_dir, how)
    before = files(run_dir)
    r = CliRunner().invoke(app, [command, str(run_dir)])
    assert r.exit_code == 2, r.output
    assert f"{db}:" in r.output
    assert files(run_dir) == before  # no database created, nothing rewritten


@pytest.mark.parametrize("text", ['{"run_id": "x", ', "null", '{"run_id": 3}', "\xff"])
@pytest.mark.parametrize("command", ["report", "export"])
def test_a_broken_manifest_is_named(tmp_path: Path, text: str, command: str) -> None:
    run_dir = make_run(tmp_path, n_eps=2)
    (run_dir / "manifest.json").write_bytes(text.encode("latin-1"))
    r = CliRunner().invoke(app, [command, str(run_dir)])
    assert r.exit_code == 2, r.output
    assert "manifest.json" in r.output and "damaged manifest" in r.output


def test_reading_a_run_writes_nothing_in_its_folder(tmp_path: Path) -> None:
    """What lets a read-only run folder work: no -wal/-shm files, no rewritten database."""
    run_dir = make_run(tmp_path, n_eps=4)
    before = files(run_dir)
    text = report_markdown(run_dir)
    assert "callnavi" in text
    r = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(tmp_path / "e.jsonl"), "--format", "jsonl"])
    assert r.exit_code == 0, r.output
    assert files(run_dir) == before
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 4


def test_a_run_with_commits_pending_in_its_wal_is_read(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=4)
    db = run_dir / "results.sqlite"
    con = sqlite3.connect(db, isolation_level=None)  # a writer still open: its commits sit in the WAL
    con.execute("PRAGMA wal_autocheckpoint=0")
    rec = json.loads(con.execute("SELECT record FROM results LIMIT 1").fetchone()[0])
    rec["episode_id"] = "extra"
    con.execute("INSERT INTO results VALUES ('callnavi','extra',0,'scored',NULL,'{}',?,0)", (json.dumps(rec),))
    try:
        assert (run_dir / "results.sqlite-wal").stat().st_size > 0
        assert "5 of 4 episodes" in report_markdown(run_dir)
    finally:
        con.close()


def test_export_to_an_unwritable_path_names_it(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, n_eps=2)
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "e.csv"
    r = CliRunner().invoke(app, ["export", str(run_dir), "--out", str(target)])
    assert r.exit_code == 2 and "--out" in r.output and str(target) in r.output


def test_html_report_where_its_figures_cannot_be_written_names_the_path(tmp_path: Path) -> None:
    # A read-only run folder (the default --out) fails the same way as this: the figures beside report.html come
    # first, and their OSError was a traceback. As root a chmod does not stop writes, so a file stands in the way.
    pytest.importorskip("matplotlib")
    run_dir = make_run(tmp_path, n_eps=2)
    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "report.html"
    before = files(run_dir)
    r = CliRunner().invoke(app, ["report", "--html", "--no-md", str(run_dir), "--out", str(target)])
    assert r.exit_code == 2, r.output
    assert "--out" in r.output and str(tmp_path / "afile") in r.output and "Traceback" not in r.output
    assert files(run_dir) == before
