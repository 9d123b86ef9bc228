"""How a long command stops on a signal: SIGTERM is taken as Ctrl-C (KeyboardInterrupt in the main thread), so
`kill` and a scheduler's stop get the same clean stop as a terminal's Ctrl-C: work in progress is abandoned, files
under a final name are whole (``rig.records.atomic_path``) and the command says how to resume."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import IO, Any


class Stopped(KeyboardInterrupt):
    """A stop (Ctrl-C, SIGTERM) that the library has already handled; str() is what was kept and how to go on,
    which the command prints instead of its own hint."""


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """For the block, SIGTERM raises KeyboardInterrupt as SIGINT does. Only the main thread takes signals; elsewhere
    (a library caller's worker thread) the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, prev)


def run_child(argv: list[str], stderr: IO[Any] | None = None) -> tuple[int, bool]:
    """Run a long command's child process (a `rig bench` of a load level or a comparison's variant, the divergence
    pass); its exit code, and whether this process was stopped meanwhile. On a stop the child is stopped too (a
    terminal's Ctrl-C reaches it already; a SIGTERM to this process alone does not) and waited for, so that it
    leaves its work as a stop should (a run marked interrupted) before this command ends. ``stderr``: where the
    child's goes (default: this process's)."""
    proc = subprocess.Popen(argv, stdout=None, stderr=stderr)
    try:
        return proc.wait(), False
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        while True:
            try:
                return proc.wait(), True
            except KeyboardInterrupt:  # a second Ctrl-C: the child is already stopping; wait for it still
                continue
