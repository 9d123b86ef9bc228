"""The sha256 of the weights a run loads, for its manifest (and MLflow's ``weights_sha256`` param).

A `weights.parts` model's is its entry's own sha256: the joined file was verified against it before it was used
(`rig.weight_parts.assemble`). A local weights file (a `weights.file`, a weights package's assembled GGUF) is hashed
once; the result is kept in the rig cache keyed by the file's resolved path, size and mtime, so a later run of the
same unchanged file reads it back instead of hashing gigabytes again. A cache entry that is damaged, or that
describes another file, is ignored and the file hashed anew. Weights that are not one local file (a folder of
Hugging Face weights, a server's model name) get no hash, with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from rig.registry import ModelSpec

SHA256 = r"^[0-9a-f]{64}$"


class HashStamp(BaseModel):
    """A cached hash: the file it is of (resolved path, size, mtime) and its sha256."""

    model_config = ConfigDict(extra="forbid")

    path: str
    size: int = Field(ge=0)
    mtime_ns: int
    sha256: str = Field(pattern=SHA256)


def stamp_file(path: str, size: int, mtime_ns: int) -> Path:
    """Where the hash of this (path, size, mtime) is cached: one small JSON file per key."""
    from rig.paths import cache_dir

    key = hashlib.sha256(f"{path}\0{size}\0{mtime_ns}".encode()).hexdigest()[:32]
    return cache_dir() / "hashes" / f"{key}.json"


def file_sha256(path: Path) -> str:
    """The file's sha256, from the cache when an entry for its resolved path, size and mtime is there and sound;
    else hashed, and the cache entry written (a read-only cache only costs the next run the hashing)."""
    from rig.inputs import InputError, read_record
    from rig.records import write_record
    from rig.weight_parts import file_sha256 as hash_file

    real = path.resolve()
    st = real.stat()
    key = (str(real), st.st_size, st.st_mtime_ns)
    where = stamp_file(*key)
    with contextlib.suppress(InputError, OSError):
        stamp = read_record(where, HashStamp)
        if (stamp.path, stamp.size, stamp.mtime_ns) == key:
            return stamp.sha256
    digest = hash_file(real)
    if real.stat().st_mtime_ns == st.st_mtime_ns:  # not cached when the file changed while it was read
        with contextlib.suppress(OSError, ValueError):
            os.makedirs(where.parent, exist_ok=True)
            write_record(where, HashStamp(path=key[0], size=key[1], mtime_ns=key[2], sha256=digest))
    return digest


def weights_sha256(spec: ModelSpec, weights: str) -> tuple[str | None, str | None]:
    """(sha256, None) for the weights the engine loads (``weights``: what `resolve_weights` gave), else (None, why)."""
    if spec.weights.parts is not None:
        return spec.weights.parts.sha256, None
    if spec.weights.kind not in ("file", "package"):
        return None, f"weights given as {spec.weights.kind} {spec.weights.ref!r}: not one local file, not hashed"
    path = Path(weights)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None, f"{path} is not a regular file: not hashed"
        return file_sha256(path), None
    except OSError as e:
        return None, f"{path} could not be hashed ({e.strerror or e})"
