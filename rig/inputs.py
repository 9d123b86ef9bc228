"""Files a lab feeds rig (models.yaml, a sweep spec): read whole, as UTF-8 text, with every refusal naming the file.

Only regular files are read. The file is opened without blocking, so a FIFO with no writer is refused instead of
hanging the command, and a device such as /dev/zero is refused instead of being read forever; a size cap bounds the
rest.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class InputError(ValueError):
    """A file that cannot be read as text; str() names it and says why."""


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


def read_text(path: Path, *, max_bytes: int) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``max_bytes`` long; else InputError naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: is {file_kind(st.st_mode)}, not a file")
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
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); is it the right file?") from None
