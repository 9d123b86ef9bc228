"""How a long command stops on a signal: SIGTERM is taken as Ctrl-C (KeyboardInterrupt in the main thread), so
`kill` and a scheduler's stop get the same clean stop as a terminal's Ctrl-C: work in progress is abandoned, files
under a final name are whole (``rig.records.atomic_path``) and the command says how to resume."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


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
