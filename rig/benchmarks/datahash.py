"""Content hashes of benchmark data files: a benchmark's ``data_hash``, recorded in the run config."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rig.benchmarks.base import read_data


def hash_paths(paths: list[Path]) -> str:
    """Content hash of data files, order-independent of the filesystem."""
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(read_data(p))  # bounded: a FIFO among the data files is refused, not waited on
    return h.hexdigest()[:16]
