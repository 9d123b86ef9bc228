"""`RunFolder`, the one reader of a run folder: what it reads from a real recorded run and a fresh one, that every
command reading a run leaves the folder exactly as it was, and the errors that name the file."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import benchmark_of, summarize
from rig.runformat import MANIFEST_FORMAT, NewerFormatError, RunFileError, read_results
from tests.render.test_report import make_run

FIXTURE = (
    Path(__file__).parents[1] / "fixtures" / "run_before_issue17"
)  # a real five-benchmark run, made before issue 17
FIVE = ("callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo")


@pytest.fixture(params=["recorded", "fresh"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """The recorded run (copied: the tests must not be able to touch the fixture) or one just made with the fake
    engine. Either sits alone in its parent folder, as a sweep's job folder holds its run."""
    if request.param == "recorded":
        dest = tmp_path / "job" / FIXTURE.name
        shutil.copytree(FIXTURE, dest)
        return dest
    return make_run(tmp_path / "job", n_eps=6)


def test_reads_the_recorded_run(tmp_path: Path) -> None:
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    f = RunFolder(run)
    assert f.manifest.format_version == 1  # recorded before formats were versioned: read through the upgrade path
    assert f.manifest.run_spec().model == "gemma3-270m"
    assert [b.name for b in f.benchmarks] == list(FIVE)
    stored = read_results(run / "results.sqlite")
    assert [r.model_dump() for r in f.results()] == [r.model_dump() for r in stored]
    assert f.count() == len(stored) == f.planned == 12  # --limit 2 questions on five benchmarks (some hold tasks)
    for name in FIVE:
        assert [r.episode_id for r in f.results(name)] == [r.episode_id for r in stored if r.benchmark == name]
    assert f.gpu_samples() == []  # a CPU run


def test_summaries_are_the_ones_computed_from_the_stored_results(run: Path) -> None:
    f = RunFolder(run)
    for info in f.benchmarks:
        results = read_results(run / "results.sqlite", info.name)
        expected = summarize(f.manifest, results, info, benchmark_of(info).headline)
        assert f.summary(info.name).model_dump() == expected.model_dump()
        assert f.summary(info.name) is f.summary(info.name)  # computed once
    every = [r for b in f.benchmarks for r in read_results(run / "results.sqlite", b.name)]
    assert f.summary().model_dump() == summarize(f.manifest, every).model_dump()
    assert f.summary().headline is None  # the whole run has no one headline score
    assert [s.benchmark for s in f.summaries()] == [b.name for b in f.benchmarks]


def test_gpu_samples_are_read_in_time_order(tmp_path: Path) -> None:
    run = make_run(tmp_path, n_eps=2)
    con = sqlite3.connect(run / "results.sqlite")
    with con:
        con.executemany("INSERT INTO gpu_samples VALUES (?,?)", [(2.0, 300), (1.0, 100), (1.5, 200)])
    con.close()
    assert [(s.t, s.used_bytes) for s in RunFolder(run).gpu_samples()] == [(1.0, 100), (1.5, 200), (2.0, 300)]


def _readers() -> dict[str, Callable[[Path], object]]:
    from rig.analyses.compare import compare_report, run_summary, variant_labels
    from rig.analyses.load.measure import measure_level
    from rig.render.export import episode_rows, list_runs
    from rig.render.html import html_report
    from rig.render.report import report_markdown
    from rig.render.screen import final_screen
    from rig.sweep.run import episode_counts, finished

    return {
        "report": report_markdown,
        "html": lambda d: html_report([d]),
        "screen": final_screen,
        "export": episode_rows,
        "runs": lambda d: list_runs(d.parent),
        "compare": lambda d: (run_summary(d), variant_labels([d, d]), compare_report([d, d])),
        "load": lambda d: measure_level(1, d, None, [], 0.05),
        "sweep progress": lambda d: (episode_counts(d.parent), finished(d.parent)),
        "folder": lambda d: (RunFolder(d).summaries(), RunFolder(d).summary(), RunFolder(d).gpu_samples()),
    }


def _state(d: Path) -> tuple[int, dict[str, bytes]]:
    """The folder's own modification time (a file created and removed again changes it) and every file's bytes."""
    return os.stat(d).st_mtime_ns, {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.mark.parametrize("reader", list(_readers()))
def test_every_reader_leaves_the_folder_as_it_was(run: Path, reader: str) -> None:
    """Read-only means not even a -wal / -shm file made and removed again: the folder's mtime would show it, and on
    a read-only medium the open would fail."""
    if reader in ("html", "compare"):
        pytest.importorskip("matplotlib")
    before = _state(run)
    time.sleep(0.01)  # a change would get a later mtime than the one taken
    _readers()[reader](run)
    assert _state(run) == before


def test_a_run_with_commits_pending_in_its_wal_is_read_and_left_alone(tmp_path: Path) -> None:
    run = make_run(tmp_path, n_eps=3)
    con = sqlite3.connect(run / "results.sqlite", isolation_level=None)  # a writer still open (a run in progress)
    try:
        con.execute("PRAGMA wal_autocheckpoint=0")
        rec = json.loads(con.execute("SELECT record FROM results LIMIT 1").fetchone()[0])
        rec["episode_id"] = "extra"
        con.execute("INSERT INTO results VALUES ('callnavi','extra',0,'scored',NULL,'{}',?,0)", (json.dumps(rec),))
        before = _state(run)[1]
        f = RunFolder(run)
        assert f.count() == 4 and len(f.results("callnavi")) == 4
        after = _state(run)[1]
        # the live writer's -shm index is shared memory: readers take their read marks in it, by SQLite's design
        assert after.keys() == before.keys()
        assert {k: v for k, v in after.items() if not k.endswith("-shm")} == {
            k: v for k, v in before.items() if not k.endswith("-shm")
        }
    finally:
        con.close()


def test_refuses_a_folder_without_a_manifest_naming_it(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    with pytest.raises(RunFileError) as e:
        RunFolder(empty)
    assert str(e.value) == f"{empty / 'manifest.json'}: not found (is {empty} a run directory?)"
    assert list(empty.iterdir()) == []


def test_a_manifest_from_a_newer_rig_is_refused_naming_it(tmp_path: Path) -> None:
    run = make_run(tmp_path, n_eps=1)
    data = json.loads((run / "manifest.json").read_text())
    data["format_version"] = MANIFEST_FORMAT + 1
    (run / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(NewerFormatError, match=re.escape(f"{run / 'manifest.json'} was written by a newer rig")):
        RunFolder(run)


def test_a_damaged_manifest_names_the_file_and_the_field(tmp_path: Path) -> None:
    run = make_run(tmp_path, n_eps=1)
    data = json.loads((run / "manifest.json").read_text())
    data["run_id"] = 3
    (run / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(RunFileError) as e:
        RunFolder(run)
    assert str(e.value) == f"{run / 'manifest.json'}: damaged manifest (run_id: Input should be a valid string)"


def test_missing_results_are_named_when_read_and_never_created(tmp_path: Path) -> None:
    run = make_run(tmp_path, n_eps=1)
    (run / "results.sqlite").unlink()
    f = RunFolder(run)  # the manifest alone opens the folder
    for read in (f.results, f.count, f.gpu_samples, f.summaries):
        with pytest.raises(RunFileError, match="^" + re.escape(f"{run / 'results.sqlite'}: not found")):
            read()
    assert not (run / "results.sqlite").exists()


def test_no_sql_on_a_run_folder_outside_the_store_and_runformat() -> None:
    """A reader queries results.sqlite only through runformat (RunFolder, read_results), the writer through Store."""
    root = Path(__file__).resolve().parents[2] / "rig"
    owners = {root / "runformat.py", root / "runfolder" / "store.py"}
    sql = re.compile(r"\b(FROM|INTO|UPDATE)\s+(results|generations|gpu_samples)\b", re.IGNORECASE)
    found = [
        f"{p.relative_to(root.parent)}:{n}"
        for p in sorted(root.rglob("*.py"))
        if p not in owners
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if sql.search(line)
    ]
    assert found == []
