"""Walking, hashing and copying a bundle's files, with progress bars."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rig.bundle.manifest import MANIFEST, SIGNATURE, BundleFile, part_of

_BUF = 8 << 20  # large reads: hashing runs at the disk's or sha256's speed, not Python's loop speed

Progress = Callable[[int], None]


def sha256_file(path: Path | int, progress: Progress | None = None) -> str:
    """sha256 of a file (a path, or a descriptor it closes) with large reads into one reused buffer (no per-chunk
    allocation)."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        # No larger than the file: zeroing 8 MB for each of thousands of small data files cost a millisecond apiece.
        buf = bytearray(max(1, min(_BUF, os.fstat(f.fileno()).st_size + 1)))
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
            if progress:
                progress(n)
    return h.hexdigest()


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def rel_path(path: Path, root: Path) -> str:
    """``path`` as a bundle path: relative to ``root``, forward slashes."""
    return path.relative_to(root).as_posix()


@contextmanager
def progress_bar(label: str, total: int | None) -> Iterator[Progress]:
    """A rich progress bar on stderr counting bytes (or items); a no-op sink when stderr is not a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    ) as prog:
        task = prog.add_task(label, total=total)
        yield lambda n: prog.advance(task, n)


def hash_tree(root: Path, skip: Iterable[str] = (MANIFEST, SIGNATURE)) -> list[BundleFile]:
    skipped = set(skip)
    paths = [p for p in _walk(root) if rel_path(p, root) not in skipped and not p.name.endswith(".tmp")]
    total = sum(p.stat().st_size for p in paths)
    files = []
    with progress_bar("hashing", total) as advance:
        for p in paths:
            rel = rel_path(p, root)
            digest = sha256_file(p, advance)
            files.append(BundleFile(path=rel, size=p.stat().st_size, sha256=digest, part=part_of(rel)))
    return files


def say(msg: str) -> None:
    """A progress line of a bundle command, on stderr."""
    print(msg, file=sys.stderr, flush=True)


def copy_path(src: Path, dst: Path) -> None:
    """A file or a folder copied into the bundle (its parents made)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)


def size_of(p: Path) -> int:
    """Bytes in a file, or in every file under a folder."""
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in _walk(p))
