"""The sha256 of the weights a run loads, for its manifest (and MLflow's ``weights_sha256`` param).

A `weights.parts` model's is its entry's own sha256 while the joined file is still the one verified against it
(`rig.weight_parts.assemble`, its stamp checked again here); otherwise, like any local weights file (a
`weights.file`, a weights package's assembled GGUF), the file is hashed; the result is kept in the rig cache keyed by
the file's resolved path, device, inode, size, mtime and ctime, so a later run of the same unchanged file reads it
back instead of hashing gigabytes again, and a file edited in place (its mtime put back or not: ctime moves) is
hashed anew. A cache entry that is damaged, or that describes another file, is ignored and the file hashed anew.
Weights that are not one local file (a folder of Hugging Face weights, a server's model name) get no hash, with the
reason.
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
    """A cached hash: the file it is of (resolved path, device, inode, size, mtime, ctime) and its sha256."""

    model_config = ConfigDict(extra="forbid")

    path: str
    device: int
    inode: int
    size: int = Field(ge=0)
    mtime_ns: int
    ctime_ns: int
    sha256: str = Field(pattern=SHA256)

    def key(self) -> tuple[str, int, int, int, int, int]:
        return (self.path, self.device, self.inode, self.size, self.mtime_ns, self.ctime_ns)


def stamp_file(key: tuple[str, int, int, int, int, int]) -> Path:
    """Where the hash of this (path, device, inode, size, mtime, ctime) is cached: one small JSON file per key."""
    from rig.paths import cache_dir

    digest = hashlib.sha256("\0".join(map(str, key)).encode()).hexdigest()[:32]
    return cache_dir() / "hashes" / f"{digest}.json"


def file_sha256(path: Path) -> str:
    """The file's sha256, from the cache when an entry for its key is there and sound; else hashed, and the cache
    entry written (a read-only cache only costs the next run the hashing)."""
    from rig.inputs import InputError, read_record
    from rig.records import write_record
    from rig.weight_parts import file_key
    from rig.weight_parts import file_sha256 as hash_file

    real = path.resolve()
    st = real.stat()
    key = (str(real), *file_key(st))
    where = stamp_file(key)
    with contextlib.suppress(InputError, OSError):
        stamp = read_record(where, HashStamp)
        if stamp.key() == key:
            return stamp.sha256
    digest = hash_file(real)
    if file_key(real.stat()) == key[1:]:  # not cached when the file changed while it was read
        with contextlib.suppress(OSError, ValueError):
            os.makedirs(where.parent, exist_ok=True)
            fields = dict(zip(("path", "device", "inode", "size", "mtime_ns", "ctime_ns"), key, strict=True))
            write_record(where, HashStamp.model_validate(fields | {"sha256": digest}))
    return digest


def weights_sha256(spec: ModelSpec, weights: str) -> tuple[str | None, str | None]:
    """(sha256, None) for the weights the engine loads (``weights``: what `resolve_weights` gave), else (None, why)."""
    from rig.weight_parts import stamped

    parts = spec.weights.parts
    if parts is not None and stamped(parts, Path(weights)):
        return parts.sha256, None
    if parts is None and spec.weights.kind not in ("file", "package"):
        return None, f"weights given as {spec.weights.kind} {spec.weights.ref!r}: not one local file, not hashed"
    path = Path(weights)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None, f"{path} is not a regular file: not hashed"
        return file_sha256(path), None
    except OSError as e:
        return None, f"{path} could not be hashed ({e.strerror or e})"
