"""A run killed with SIGKILL mid-way and resumed has exactly the episodes of an uninterrupted run."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

ARGS = ["--benchmark", "callnavi", "--limit", "4", "-O", "task=routing", "--no-report", "--max-tokens", "24"]


def rig(*args: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rig.cli", "bench", *args, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def rows(run_dir: Path) -> list[tuple[str, int, str]]:
    con = sqlite3.connect(run_dir / "results.sqlite")
    out = [
        (e, r, json.loads(rec)["generations"][0]["text"])
        for e, r, rec in con.execute("SELECT episode_id, repeat, record FROM results ORDER BY episode_id, repeat")
    ]
    con.close()
    return out


def test_sigkill_then_resume_equals_uninterrupted(tmp_path: Path, embedded_weights: str) -> None:
    out = tmp_path / "runs"
    p = rig(*ARGS, out=out)
    run_dir = None
    deadline = time.time() + 240
    while time.time() < deadline:  # wait until at least one episode is committed, then kill hard
        dirs = list(out.glob("*/results.sqlite")) if out.exists() else []
        if dirs:
            con = sqlite3.connect(dirs[0])
            try:
                n = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.OperationalError:
                n = 0
            con.close()
            if n >= 1:
                run_dir = dirs[0].parent
                break
        time.sleep(0.2)
    assert run_dir is not None, "run never stored an episode"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    partial = rows(run_dir)
    assert 1 <= len(partial) < 4
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "running"  # killed: never marked finished

    # resuming with a changed config is refused
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "rig.cli",
            "bench",
            "--model",
            "gemma3-270m",
            *ARGS[:-2],
            "--max-tokens",
            "25",
            "--resume",
            run_dir.name,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "configuration changed" in bad.stderr

    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "bench", "--resume", run_dir.name, "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    resumed = rows(run_dir)
    keys = [(e, rep) for e, rep, _ in resumed]
    assert len(keys) == len(set(keys)) == 4
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "finished"

    full = rig(*ARGS, out=tmp_path / "full")
    full.wait(timeout=300)
    full_dir = next((tmp_path / "full").iterdir())
    assert rows(full_dir) == resumed  # same episodes, same (greedy) answers


def killable(out: Path, *args: str, events: Path | None = None, commit_delay: float = 0.0) -> subprocess.Popen:
    """The real `rig bench` (real engine) through tests/execution/killable.py, which can slow each commit down."""
    from tests.conftest import REPO

    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KILLABLE_FAKE", None)
    if events is not None:
        env["KILLABLE_EVENTS"] = str(events)
    if commit_delay:
        env["KILLABLE_COMMIT_DELAY"] = str(commit_delay)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.execution.killable", "bench", *args, "--out", str(out)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _until(cond, timeout: float = 300) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _count(run_dir: Path) -> int:
    try:
        return len(rows(run_dir))
    except sqlite3.Error:
        return 0


def test_kills_at_load_mid_episode_mid_commit_and_sigterm_then_resume(tmp_path: Path, embedded_weights: str) -> None:
    args = ["--benchmark", "callnavi", "--limit", "6", "-O", "task=routing", "--no-report", "--max-tokens", "16"]
    out, ev = tmp_path / "runs", tmp_path / "events"
    # SIGKILL during the model load (inside llama.cpp's load, not before it): the engine versions are not recorded
    load_ev = tmp_path / "load_events"
    p = killable(out, *args, events=load_ev)
    _until(lambda: load_ev.exists() and "load" in load_ev.read_text().split())
    p.kill()
    p.wait()
    assert "loaded" not in load_ev.read_text().split(), "the load finished before the kill"
    (run_dir,) = list(out.iterdir())
    assert json.loads((run_dir / "manifest.json").read_text())["versions"] == {}
    resume = ["--resume", run_dir.name]
    # SIGKILL mid-episode: once one more episode is stored, a little into the next one
    p = killable(out, *resume)
    n = _count(run_dir)
    _until(lambda: _count(run_dir) > n)
    time.sleep(0.3)
    p.kill()
    p.wait()
    # SIGKILL mid-commit: the rows are inserted, COMMIT is waiting
    p = killable(out, *resume, events=ev, commit_delay=2.0)
    _until(lambda: ev.exists() and "commit" in ev.read_text())
    time.sleep(0.2)
    p.kill()
    p.wait()
    # SIGTERM mid-episode: a clean stop while llama.cpp decodes in its thread (it segfaulted before)
    p = killable(out, *resume)
    n = _count(run_dir)
    _until(lambda: _count(run_dir) > n)
    time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err[-3000:]  # stopped, not finished (a segfault was -11)
    assert f"resume with: rig bench --resume {run_dir.name}" in err
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    # to the end
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "bench", *resume, "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    resumed = rows(run_dir)
    keys = [(e, rep) for e, rep, _ in resumed]
    assert len(keys) == len(set(keys))
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "finished"
    full = subprocess.run(
        [sys.executable, "-m", "rig.cli", "bench", *args, "--out", str(tmp_path / "full")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert full.returncode == 0, full.stderr
    assert rows(next((tmp_path / "full").iterdir())) == resumed  # zero lost, zero duplicated, same outputs
