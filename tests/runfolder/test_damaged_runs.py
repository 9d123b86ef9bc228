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


def _edit_manifest(run_dir: Path, **fields: object) -> None:
    raw = json.loads((run_dir / "manifest.json").read_text())
    for k, v in fields.items():
        *head, last = k.split(".")
        at = raw
        for h in head:
            at = at[h]
        at[last] = v
    (run_dir / "manifest.json").write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("format_version", "99", "format_version: Input should be a valid integer"),  # not past the version check
        ("format_version", True, "format_version: Input should be a valid integer"),
        ("config.limit", True, "config.limit: Input should be a valid integer"),  # not a limit of 1
        ("concurrency", "4", "concurrency: Input should be a valid integer"),
    ],
)
def test_a_manifest_is_read_strictly(tmp_path: Path, field: str, value: object, where: str) -> None:
    run_dir = make_run(tmp_path, n_eps=2)
    _edit_manifest(run_dir, **{field: value})
    r = CliRunner().invoke(app, ["report", str(run_dir)])
    assert r.exit_code == 2 and f"damaged manifest ({where}" in " ".join(r.output.split()), r.output


def test_a_deeply_nested_or_special_manifest_spoils_only_its_own_row_in_rig_runs(
    tmp_path: Path, deadline: None
) -> None:
    """A manifest nested 100,000 deep made `rig runs` fail (a RecursionError) for every run in the folder; a FIFO
    made it hang (issue 37)."""
    good = make_run(tmp_path / "a", n_eps=2)
    root = good.parent
    (root / "deep").mkdir()
    (root / "deep" / "manifest.json").write_text('{"engine_info": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "manifest.json")
    r = CliRunner().invoke(app, ["runs", str(root)])
    assert r.exit_code == 0 and "r1" in r.output and "Traceback" not in r.output, r.output


def test_rig_runs_on_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["runs", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such folder" in r.output, r.output
    (tmp_path / "file").write_text("x")
    r = CliRunner().invoke(app, ["runs", str(tmp_path / "file")])
    assert r.exit_code == 2 and "not a folder" in r.output, r.output


def test_text_from_a_manifest_reaches_the_terminal_printable(tmp_path: Path) -> None:
    """A run id or model name holding an escape sequence (here: cursor up; clear screen, set title) or U+202E (the
    line shown reordered) is printed with it made visible, not acted on (issue 37)."""
    run_dir = make_run(tmp_path, n_eps=2)
    _edit_manifest(run_dir, **{"config.model.name": "m\u202ex", "run_id": "r1\x1b[1A"})
    r = CliRunner().invoke(app, ["runs", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\u202e" not in r.output
    assert "r1\\x1b[1A" in r.output and "m\\u202ex" in r.output


def test_nan_in_stored_scores_does_not_stop_the_report(tmp_path: Path) -> None:
    """A results database edited or damaged to hold NaN scores stopped `rig report` with a traceback from the
    interval code; a NaN score reads as no score, as JSON would have stored it (issue 37)."""
    run_dir = make_run(tmp_path, n_eps=4)
    con = sqlite3.connect(run_dir / "results.sqlite")
    for rowid, record in con.execute("SELECT rowid, record FROM results").fetchall():
        d = json.loads(record)
        d["scores"] = {k: float("nan") for k in d["scores"]}
        con.execute("UPDATE results SET record = ? WHERE rowid = ?", (json.dumps(d), rowid))
    con.commit()
    con.close()
    r = CliRunner().invoke(app, ["report", str(run_dir)])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert "| callnavi" in report_markdown(run_dir) or "callnavi" in report_markdown(run_dir)
