"""Walking, hashing and copying a bundle's files, with progress bars."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from rig.bundle.manifest import MANIFEST, SIGNATURE, BundleFile, part_of
from rig.progress import progress

_BUF = 8 << 20  # large reads: hashing runs at the disk's or sha256's speed, not Python's loop speed

Advance = Callable[[int], None]


def sha256_file(path: Path | int, advance: Advance | None = None) -> str:
    """sha256 of a file (a path, or a descriptor it closes) with large reads into one reused buffer (no per-chunk
    allocation)."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        # No larger than the file: zeroing 8 MB for each of thousands of small data files cost a millisecond apiece.
        buf = bytearray(max(1, min(_BUF, os.fstat(f.fileno()).st_size + 1)))
        view = memoryview(buf)
        while n := f.readinto(buf):
            h.update(view[:n])
            if advance:
                advance(n)
    return h.hexdigest()


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def rel_path(path: Path, root: Path) -> str:
    """``path`` as a bundle path: relative to ``root``, forward slashes."""
    return path.relative_to(root).as_posix()


def hash_tree(root: Path, skip: Iterable[str] = (MANIFEST, SIGNATURE)) -> list[BundleFile]:
    skipped = set(skip)
    paths = [p for p in _walk(root) if rel_path(p, root) not in skipped and not p.name.endswith(".tmp")]
    total = sum(p.stat().st_size for p in paths)
    files = []
    with progress("hashing", total, unit="bytes", terminal_only=True) as bar:
        for p in paths:
            rel = rel_path(p, root)
            digest = sha256_file(p, bar.advance)
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
