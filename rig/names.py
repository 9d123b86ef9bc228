"""Names from users and files, made safe: ``path_name`` is the one way a name becomes part of a path, and
``printable`` the one way text from a file (a model name, an id, an error quoting a value) reaches a terminal.

A model name in models.yaml, a ``--name`` or ``--label`` and an id in a manifest are text anyone can write: a ``/`` or
``..`` in one would write outside the folder it is meant for, an escape sequence would clear or rewrite the screen,
and a bidi control (U+202E) would show a line in another order than it is stored.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

MAX_NAME_BYTES = 128  # a file system takes 255 bytes a name; the rest is left for a suffix or a content hash
MAX_LINE_CHARS = 2000  # one echoed value (a 50 MB option) is cut to its start and end

# The characters a terminal acts on or reorders, as character classes so a 50 MB value is scanned in C: C0/C1
# controls and DEL (category Cc, closed by Unicode's stability policy), lone surrogates (Cs, not printable at all),
# the line and paragraph separators (Zl, Zp) and Unicode's bidirectional formatting characters and marks.
# tests/test_names.py holds both classes to unicodedata's categories over every code point.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_BUT_NEWLINE_AND_TAB = f"\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029{_BIDI}"
_ESCAPED = re.compile(f"[{_BUT_NEWLINE_AND_TAB}]")  # what `printable` escapes
_UNSAFE = re.compile(f"[\n\t{_BUT_NEWLINE_AND_TAB}]")


class BadName(ValueError):
    """A name that cannot become part of a path; str() says which and why."""


def _unsafe(c: str) -> bool:
    """A character a terminal acts on or reorders (``_UNSAFE``)."""
    return _UNSAFE.match(c) is not None


def name_error(name: str) -> str | None:
    """Why ``name`` cannot be a file or folder name, else None."""
    if not name or not name.strip():
        return "is empty"
    if name in (".", ".."):
        return f"{name!r} names a folder, not a file"
    if "/" in name or "\\" in name:
        return "has a path separator (/ or \\)"
    bad = next((c for c in name if _unsafe(c) or unicodedata.category(c) == "Cf"), None)
    if bad is not None:
        return f"has a control character (U+{ord(bad):04X})"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not UTF-8 text (a lone surrogate)"
    if size > MAX_NAME_BYTES:
        return f"is {size} bytes long (at most {MAX_NAME_BYTES})"
    return None


def path_name(name: str, what: str = "name") -> str:
    """``name`` when it can be one component of a path; else BadName naming ``what`` and why."""
    err = name_error(name)
    if err:
        raise BadName(f"{what} {printable(name, 80)!r} {err}")
    return name


def name_path(folder: Path, name: str, suffix: str = "", what: str = "name") -> Path:
    """``folder / (name + suffix)``, refusing a name that is not one plain component (``path_name``)."""
    return Path(folder) / (path_name(name, what) + suffix)


def printable(text: object, max_chars: int | None = MAX_LINE_CHARS) -> str:
    """``text`` safe to print: controls, escape sequences and bidi controls shown as ``\\xNN`` / ``\\uNNNN``
    (newlines and tabs kept), and each line over ``max_chars`` (None: no limit) cut to its start and end with the
    count between."""
    s = _ESCAPED.sub(lambda m: _escape(m.group()), str(text))
    if max_chars is not None and len(s) > max_chars:
        s = "\n".join(_cut(line, max_chars) for line in s.split("\n"))
    return s


def escape(text: object, quote: bool = True) -> str:
    """``text`` for HTML: ``html.escape`` of its ``printable`` form (whole), so a bidi control in a model name or a
    reply cannot reorder what the page shows."""
    import html

    return html.escape(printable(text, None), quote=quote)


def _escape(c: str) -> str:
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _cut(line: str, max_chars: int) -> str:
    if len(line) <= max_chars:
        return line
    head, tail = line[: max_chars * 3 // 4], line[-(max_chars // 4) :]
    return f"{head}... [{len(line) - len(head) - len(tail):,} characters left out] ...{tail}"
