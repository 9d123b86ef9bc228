"""The one bounded reader of files a user, another process or a crash can damage (models.yaml, sweep and run specs,
load plans, run manifests, bundle manifests, keys, signatures, a child's settings): every refusal is an InputError
naming the file, and the field when a record does not validate.

Only regular files are read. The file is opened without blocking, so a FIFO with no writer is refused instead of
hanging the command, and a device such as /dev/zero is refused instead of being read forever; a size cap bounds the
rest. JSON and YAML go through the bounded loaders of ``rig.decoding.safe`` (nesting depth, value count, integer
digits, finite numbers), and records are validated strictly: a ``true`` is not an integer, a ``"3"`` not a number.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

# A run manifest or spec is a few kilobytes; a bundle manifest lists every file of a bundle (tens of thousands).
MAX_RECORD_BYTES = 16 << 20
MAX_RECORD_VALUES = 1_000_000


class InputError(ValueError):
    """A file that cannot be read; str() names it and says why."""


def file_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    for test, words in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def open_regular(path: Path, *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor on ``path`` if it is a regular file (opened without blocking: a FIFO with no writer
    is refused, not waited on); else InputError naming it. ``follow_symlinks=False`` refuses a symlink too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as e:
        if not follow_symlinks and os.path.islink(path):
            raise InputError(f"{path}: is a symlink, not followed") from None
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputError(f"{path}: is {file_kind(st.st_mode)}, not a file")
    return fd


def read_bytes(path: Path, *, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``; else InputError naming it."""
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        chunks, size = [], 0
        while size <= max_bytes:  # the size in the inode may be wrong (procfs says 0): count what is read
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise InputError(f"{path}: larger than {max_bytes:,} bytes; is it the right file?")
    return b"".join(chunks)


def read_text(path: Path, *, max_bytes: int) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` long; else InputError naming it."""
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); is it the right file?") from None


def parse_json(path: Path, text: str | bytes, *, max_nodes: int = MAX_RECORD_VALUES, finite: bool = True) -> Any:
    """The JSON value of ``text`` (read from ``path``), bounded as ``rig.decoding.safe`` bounds a reply (depth,
    values, integer digits; NaN and infinities only with ``finite=False``); else InputError naming the file."""
    from rig.decoding.safe import load_json

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: not UTF-8 text (byte {e.start}); is it the right file?") from None
    value, err = load_json(text, max_chars=len(text), max_nodes=max_nodes, finite=finite)
    if err:
        raise InputError(f"{path}: not valid JSON ({err.removeprefix('invalid JSON: ')})")
    return value


def read_json(
    path: Path, *, max_bytes: int = MAX_RECORD_BYTES, max_nodes: int = MAX_RECORD_VALUES, finite: bool = True
) -> Any:
    """The JSON value of the regular file ``path``, bounded in size and shape; else InputError naming it."""
    return parse_json(path, read_text(path, max_bytes=max_bytes), max_nodes=max_nodes, finite=finite)


def read_yaml(path: Path, *, max_bytes: int, max_nodes: int, finite: bool = True) -> Any:
    """One YAML document of the regular file ``path`` through the bounded YAML loader; else InputError naming it."""
    from rig.decoding.safe import load_yaml

    value, err = load_yaml(
        read_text(path, max_bytes=max_bytes), max_chars=max_bytes, max_nodes=max_nodes, finite=finite
    )
    if err:
        raise InputError(f"{path}: not valid YAML: {err.removeprefix('invalid YAML: ')}")
    return value


def validation_where(e: ValidationError) -> str:
    """The first failed field of a validation error as ``loc.path: message`` (how rig names a field in a file); an
    error of the record itself (a JSON list where an object belongs, a check across fields) has no field path and is
    named ``the whole file``."""
    first = e.errors()[0]
    return (".".join(str(p) for p in first["loc"]) or "the whole file") + ": " + first["msg"]


R = TypeVar("R", bound=BaseModel)


def validate_record(path: Path, value: Any, cls: type[R], *, context: dict[str, Any] | None = None) -> R:
    """``value`` (a bounded JSON value read from ``path``) as a ``cls`` record, validated strictly as JSON is: a
    bool is no integer, a string no number or version (a path, a date or a literal from a string is still read);
    else InputError naming the file and the first field."""
    try:
        return cls.model_validate_json(json.dumps(value), strict=True, context=context)
    except ValidationError as e:
        raise InputError(f"{path}: {validation_where(e) if e.errors() else e}") from None
    except ValueError as e:  # a validator's own refusal outside pydantic's error list
        raise InputError(f"{path}: {e}") from None


def read_record(
    path: Path, cls: type[R], *, max_bytes: int = MAX_RECORD_BYTES, context: dict[str, Any] | None = None
) -> R:
    """A record stored as JSON in the regular file ``path``: read bounded, validated strictly (``validate_record``);
    else InputError naming the file and the field."""
    return validate_record(path, read_json(path, max_bytes=max_bytes), cls, context=context)
