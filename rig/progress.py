"""One progress bar for long work, on stderr: items (done / total) or bytes (size, speed), elapsed time and ETA.

Every long step uses it (hashing and copying a bundle, joining weight parts, the divergence pass, re-scoring, map
recording), so a user sees the same bar everywhere. The episodes bar of `rig bench` builds on the same columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn, TaskID


def columns(unit: Literal["items", "bytes"], label: str = "[bold]{task.description}") -> list[ProgressColumn]:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    counts = [DownloadColumn(), TransferSpeedColumn()] if unit == "bytes" else [MofNCompleteColumn()]
    return [TextColumn(label), BarColumn(), *counts, TimeElapsedColumn(), TimeRemainingColumn()]


class Counter:
    """What a step moves its bar with: ``advance`` by a count, or ``update`` to where it stands."""

    def __init__(self, bar: Progress, task: TaskID) -> None:
        self._bar, self._task = bar, task

    def advance(self, n: float = 1) -> None:
        self._bar.advance(self._task, n)

    def update(self, done: float, total: float | None) -> None:
        self._bar.update(self._task, completed=done, total=total)


@contextmanager
def progress(
    label: str,
    total: float | None = None,
    *,
    unit: Literal["items", "bytes"] = "items",
    transient: bool = False,
    terminal_only: bool = False,
) -> Iterator[Counter]:
    """A bar for one step. ``transient`` clears it when the step ends; ``terminal_only`` draws nothing when stderr is
    not a terminal (for steps run inside other commands' captured output)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress

    console = Console(stderr=True)
    with Progress(
        *columns(unit), console=console, transient=transient, disable=terminal_only and not console.is_terminal
    ) as bar:
        # a label carries names from files (a GGUF's): shown as written, never read as rich markup
        yield Counter(bar, bar.add_task(escape(label), total=total))
