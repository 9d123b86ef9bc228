"""Names become paths only through `path_name`; text from files reaches a terminal only through `printable` and
HTML only through `escape` (issue 37: `--name ../escape`, a model name holding ANSI escapes or U+202E)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from rig.names import _ESCAPED, MAX_NAME_BYTES, BadName, _unsafe, escape, name_path, path_name, printable


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../escape", "path separator"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("..", "names a folder"),
        (".", "names a folder"),
        ("", "is empty"),
        ("  ", "is empty"),
        ("a\nb", "control character (U+000A)"),
        ("a\x1b[2Jb", "control character (U+001B)"),
        ("evil\u202etxt.gguf", "control character (U+202E)"),
        ("a\0b", "control character (U+0000)"),
        ("x" * (MAX_NAME_BYTES + 1), "bytes long"),
        ("é" * (MAX_NAME_BYTES // 2 + 1), "bytes long"),  # counted in bytes, as a file system does
        ("a\udc80", "control character"),
    ],
)
def test_a_name_that_is_not_one_plain_path_component_is_refused(name: str, why: str) -> None:
    with pytest.raises(BadName, match="--name") as e:
        path_name(name, "--name")
    assert why in str(e.value)
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)  # the refusal itself is printable


def test_a_plain_name_is_a_child_of_its_folder(tmp_path: Path) -> None:
    assert name_path(tmp_path, "gemma3-270m-q8_0", ".gguf") == tmp_path / "gemma3-270m-q8_0.gguf"
    assert path_name("qwen2.5-coder-1.5b") == "qwen2.5-coder-1.5b"
    assert path_name("é" * (MAX_NAME_BYTES // 2)) == "é" * (MAX_NAME_BYTES // 2)


def test_printable_shows_escapes_and_bidi_controls_instead_of_acting_on_them() -> None:
    text = "model\x1b[2J\x1b]0;title\x07\u202eevil\u2066 x\r\x9b"
    shown = printable(text)
    assert all(c not in shown for c in "\x1b\x07\u202e\u2066\r\x9b")
    assert shown == "model\\x1b[2J\\x1b]0;title\\x07\\u202eevil\\u2066 x\\x0d\\x9b"
    assert printable("two\nlines\tkept") == "two\nlines\tkept"
    assert printable("lone \udc80") == "lone \\udc80"  # encodable: a terminal write cannot fail on it


def test_the_unsafe_character_classes_are_unicodes_categories_over_every_code_point() -> None:
    # the classes are written out for speed; this Python's Unicode tables say which characters they must hold
    bidi = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    differ = []
    for cp in range(0x110000):
        c = chr(cp)
        unsafe = c in bidi or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")
        if _unsafe(c) != unsafe or bool(_ESCAPED.fullmatch(c)) != (unsafe and c not in "\n\t"):
            differ.append(hex(cp))
    assert differ == []


def test_printable_cuts_a_huge_value_to_its_start_and_end() -> None:
    value = "a" * 50_000_000 + "END"
    shown = printable(f"--option x={value}: not valid")
    assert len(shown) < 3000 and shown.startswith("--option x=aaa") and shown.endswith("END: not valid")
    assert "characters left out" in shown


def test_escape_for_html_also_neutralises_bidi_controls() -> None:
    assert escape('<b a="1">\u202eevil</b>') == "&lt;b a=&quot;1&quot;&gt;\\u202eevil&lt;/b&gt;"
    assert escape("x" * 10_000) == "x" * 10_000  # HTML is not cut: a report shows whole replies
