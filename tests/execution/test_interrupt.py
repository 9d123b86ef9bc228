"""Signals, kills and a second process on a run: a fake engine whose calls run in threads, in a real `rig bench`
subprocess (tests/execution/killable.py). The same scenario on the real model is in test_resume.py."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

MODELS = (
    "models:\n  fake:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: none\n"
    "    context_length: 4096\n"
)
ARGS = ["--model", "fake", "--benchmark", "callnavi", "-O", "task=routing", "--limit", "6", "--no-report"]


def start(
    tmp: Path,
    out: Path,
    *args: str,
    events: Path | None = None,
    commit_delay: float = 0.0,
    resume: str | None = None,
    delay: float = 0.15,
) -> subprocess.Popen:
    env = dict(os.environ, KILLABLE_FAKE="1", PYTHONPATH=str(REPO), KILLABLE_DELAY=str(delay))
    if events is not None:
        env["KILLABLE_EVENTS"] = str(events)
    if commit_delay:
        env["KILLABLE_COMMIT_DELAY"] = str(commit_delay)
    cmd = [
        sys.executable,
        "-m",
        "tests.execution.killable",
        "bench",
        "--models",
        str(tmp / "models.yaml"),
        "--out",
        str(out),
    ]
    cmd += ["--resume", resume] if resume else list(args)
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def setup(tmp: Path) -> None:
    (tmp / "models.yaml").write_text(MODELS)
    (tmp / "w.gguf").write_bytes(b"")


def wait_for(events: Path, name: str, count: int = 1, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if events.exists() and events.read_text().split().count(name) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {count} x {name!r} event in {timeout}s")


def rows(run_dir: Path) -> list[tuple]:
    con = sqlite3.connect(f"{(run_dir / 'results.sqlite').resolve().as_uri()}?mode=ro", uri=True)
    try:
        out = [
            (b, e, r, s, json.loads(rec)["generations"][0]["text"])
            for b, e, r, s, rec in con.execute(
                "SELECT benchmark, episode_id, repeat, scores, record FROM results"
                " ORDER BY benchmark, episode_id, repeat"
            )
        ]
    finally:
        con.close()
    return out


def only_run(out: Path) -> Path:
    dirs = [d for d in out.iterdir() if (d / "manifest.json").exists()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_kills_and_sigterm_then_resume_equal_an_uninterrupted_run(tmp_path: Path) -> None:
    setup(tmp_path)
    out, ev = tmp_path / "runs", tmp_path / "events"
    # 1. SIGKILL during the model load (the run folder exists, nothing stored)
    p = start(tmp_path, out, *ARGS, events=ev)
    wait_for(ev, "load")
    p.kill()
    p.wait()
    run_dir = only_run(out)
    rid = run_dir.name
    # 2. SIGKILL mid-episode (an engine call in its thread)
    p = start(tmp_path, out, resume=rid, events=ev)
    wait_for(ev, "call", 3)
    p.kill()
    p.wait()
    # 3. SIGKILL mid-commit (rows inserted, COMMIT not yet run)
    p = start(tmp_path, out, resume=rid, events=ev, commit_delay=0.5)
    wait_for(ev, "commit", 2)
    p.kill()
    p.wait()
    stored = rows(run_dir)
    # 4. SIGTERM while a call is in its thread: clean stop, no abort, interrupted, resume hint
    p = start(tmp_path, out, resume=rid, events=ev)
    wait_for(ev, "call", ev.read_text().split().count("call") + 1)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "engine closed while a call" not in err
    assert f"rig bench --resume {rid}" in err
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    assert len(rows(run_dir)) >= len(stored)
    # 5. resume to the end
    p = start(tmp_path, out, resume=rid)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    resumed = rows(run_dir)
    keys = [r[:3] for r in resumed]
    assert len(keys) == len(set(keys))
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "finished"

    full_out = tmp_path / "full"
    p = start(tmp_path, full_out, *ARGS)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert resumed == rows(only_run(full_out))  # nothing lost, nothing duplicated, same outputs and scores


def test_a_second_process_on_the_same_run_is_refused(tmp_path: Path) -> None:
    setup(tmp_path)
    out, ev = tmp_path / "runs", tmp_path / "events"
    first = start(tmp_path, out, *ARGS, events=ev, delay=5.0)
    try:
        wait_for(ev, "call")
        rid = only_run(out).name
        second = start(tmp_path, out, resume=rid)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2
        assert "another rig process" in err and f"pid {first.pid}" in err
    finally:
        first.kill()
        first.wait()


def test_sigint_stops_cleanly_too(tmp_path: Path) -> None:
    setup(tmp_path)
    out, ev = tmp_path / "runs", tmp_path / "events"
    p = start(tmp_path, out, *ARGS, events=ev)
    wait_for(ev, "call", 2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted; resume with: rig bench --resume" in err
    assert json.loads((only_run(out) / "manifest.json").read_text())["status"] == "interrupted"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs (root only), unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path) -> Path:
    """Take every free block of ``disk``; returns the filler file to remove."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_full_disk_mid_run_exits_2_keeps_what_was_stored_and_resumes(tmp_path: Path, small_disk: Path) -> None:
    """The disk fills while episodes are being stored: `rig bench` says "no space left on" the run's path, exits 2
    with no traceback; the episodes stored before stay, and a resume once space is freed completes the run with
    nothing lost or duplicated, equal to an uninterrupted run."""
    setup(tmp_path)
    out, ev = small_disk / "runs", tmp_path / "events"
    p = start(tmp_path, out, *ARGS, events=ev, delay=0.3)
    wait_for(ev, "call", 3)
    filler = fill(small_disk)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    run_dir = only_run(out)
    assert f"no space left on {run_dir}" in err and "Traceback" not in err, err
    assert json.loads((run_dir / "manifest.json").read_text())["run_id"] == run_dir.name  # the manifest is whole
    filler.unlink()
    stored = rows(run_dir)
    assert stored  # what was committed before the disk filled is kept
    p = start(tmp_path, out, resume=run_dir.name)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    resumed = rows(run_dir)
    assert set(stored) <= set(resumed) and len(resumed) == len({r[:3] for r in resumed})
    full_out = tmp_path / "full"
    p = start(tmp_path, full_out, *ARGS)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert resumed == rows(only_run(full_out))


def test_full_disk_before_the_run_starts_exits_2(tmp_path: Path, small_disk: Path) -> None:
    setup(tmp_path)
    fill(small_disk)
    p = start(tmp_path, small_disk / "runs", *ARGS)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2, err
    assert "Traceback" not in err and "No space left on device" in err, err


def test_full_disk_when_writing_the_report_exits_2_and_keeps_the_run(
    tmp_path: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run finished and stored everything, then report.md cannot be written (OSError 28): `rig bench` says where
    there is no space, exits 2, leaves no short report under its name, and `rig report` writes it once space is
    freed."""
    import shutil

    from typer.testing import CliRunner

    from rig.cli import app
    from rig.execution import bench
    from tests.render.test_report import make_run

    run_dir = small_disk / "r1"
    shutil.copytree(make_run(tmp_path / "made"), run_dir)
    before = rows(run_dir)
    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: run_dir)
    filler = fill(small_disk)
    r = CliRunner().invoke(app, ["bench", "--model", "gemma3-270m", "--out", str(small_disk)])
    assert r.exit_code == 2, r.output
    assert f"no space left on {run_dir / 'report.md'}" in r.output and "Traceback" not in r.output, r.output
    assert not (run_dir / "report.md").exists() and not (run_dir / "report.html").exists()
    filler.unlink()
    assert rows(run_dir) == before
    r = CliRunner().invoke(app, ["report", str(run_dir)])
    assert r.exit_code == 0, r.output
    assert (run_dir / "report.md").read_text().startswith("#")
