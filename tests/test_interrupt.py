"""One mechanism for a long command's stop (issue 37): only rig/interrupt.py installs a SIGTERM handler, so every
command (bench included) takes SIGTERM as Ctrl-C the same way. Read from the source with ast (nothing imported)."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rig.interrupt import sigterm_as_interrupt

ROOT = Path(__file__).resolve().parents[1]


def _sigterm_handlers(tree: ast.AST) -> list[int]:
    """Lines that call ``signal.signal(signal.SIGTERM, ...)`` (or ``signal(SIGTERM, ...)``)."""
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        fn, first = node.func, node.args[0]
        named = (isinstance(fn, ast.Attribute) and fn.attr == "signal") or (
            isinstance(fn, ast.Name) and fn.id == "signal"
        )
        sig = first.attr if isinstance(first, ast.Attribute) else first.id if isinstance(first, ast.Name) else ""
        if named and sig == "SIGTERM":
            lines.append(node.lineno)
    return lines


def test_only_rig_interrupt_installs_a_sigterm_handler() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "rig").rglob("*.py"))
        if (lines := _sigterm_handlers(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert set(found) == {os.path.join("rig", "interrupt.py")}, found


def test_the_check_finds_a_handler() -> None:
    src = "import signal\nsignal.signal(signal.SIGTERM, lambda *_: None)\nfrom signal import signal as s\n"
    assert _sigterm_handlers(ast.parse(src)) == [2]


def test_sigterm_is_ctrl_c_in_the_block_and_restored_after() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # not reached: the handler raises in the sleep
    assert signal.getsignal(signal.SIGTERM) is before


def stopped_midway(
    cwd: Path, ready: Path, target: str, args: list[str], how: str, path: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`rig ARGS` with ``target`` slowed (tests/stopping.py), stopped after the first call of it returned: Ctrl-C
    as a terminal sends it (SIGINT to the process group) or SIGTERM to the process alone. Shared by the real-signal
    tests of merge, models convert and bundle create. ``path``: more folders for the child's sys.path."""
    # this checkout first, then ``path``, then what the test put on the path (the sweep tests' plugins)
    inherited = (os.environ.get("PYTHONPATH"),) if os.environ.get("PYTHONPATH") else ()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *path, *inherited])}
    argv = [sys.executable, "-m", "tests.stopping", str(ready), target, "30", *args]
    pipe = subprocess.PIPE
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=True, start_new_session=True)
    deadline = time.monotonic() + 600
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"ended (exit {proc.returncode}) before it was stopped: {err[-2000:]}")
        time.sleep(0.05)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
