"""The one bounded reader of files a user, another process or a crash can damage (issue 37): regular files only,
opened without blocking, a size cap, a nesting cap, finite numbers, strict records; every refusal names the file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from rig.inputs import InputError, read_bytes, read_json, read_record, read_text, read_yaml, validate_record
from tests.readers import FILE_READERS, FILE_REGRESSIONS, VALID_READERS, valid_reader


class Rec(BaseModel):
    format_version: int = 1
    limit: int | None = None
    temperature: float = 0.0
    data: Path | None = None


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a file"),  # no writer: a blocking open never returns
        (lambda p: p.mkdir(), "is a directory, not a file"),
        (lambda p: None, "file not found"),
        (lambda p: p.write_bytes(b"\xff\xfe{}"), "not UTF-8 text (byte 0)"),
        (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "nested more than 64 deep"),
        (lambda p: p.write_text('{"a": NaN}'), "NaN is not JSON"),
        (lambda p: p.write_text('{"a": 1e999}'), "out of range"),
        (lambda p: p.write_text('{"a": ' + "9" * 5000 + "}"), "digits"),
        (lambda p: p.write_bytes(b" " * (2 << 20)), "larger than 1,048,576 bytes"),
    ],
    ids=["fifo", "directory", "missing", "binary", "deep", "nan", "infinite", "long-int", "huge"],
)
def test_a_damaged_or_special_file_is_refused_naming_it(tmp_path: Path, deadline: None, make, says: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "manifest.json"
    make(path)
    t0 = time.perf_counter()
    with pytest.raises(InputError) as e:
        read_json(path, max_bytes=1 << 20)
    assert str(e.value).startswith(f"{path}: ") and says in str(e.value), str(e.value)
    assert time.perf_counter() - t0 < 5


def test_a_device_is_refused_not_read_forever(deadline: None) -> None:
    for dev in ("/dev/zero", "/dev/urandom"):
        with pytest.raises(InputError, match=f"{dev}: is a character device, not a file"):
            read_text(Path(dev), max_bytes=1 << 20)


def test_a_symlink_is_refused_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"key")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert read_bytes(tmp_path / "link", max_bytes=10) == b"key"
    with pytest.raises(InputError, match="is a symlink, not followed"):
        read_bytes(tmp_path / "link", max_bytes=10, follow_symlinks=False)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"limit": true}', "limit: Input should be a valid integer"),  # not 1
        ('{"format_version": "3"}', "format_version: Input should be a valid integer"),  # not past a version check
        ('{"limit": 2.0}', "limit: Input should be a valid integer"),
        ('{"temperature": "0.5"}', "temperature: Input should be a valid number"),
        ("[1]", "the whole file"),
    ],
)
def test_records_are_read_strictly(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "spec.json"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        read_record(path, Rec)
    assert str(e.value).startswith(f"{path}: {where}"), str(e.value)


def test_strict_records_still_read_paths_and_numbers_as_json_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text('{"format_version": 2, "limit": 3, "temperature": 1, "data": "d/x.json"}')
    assert read_record(path, Rec) == Rec(format_version=2, limit=3, temperature=1.0, data=Path("d/x.json"))
    assert validate_record(path, {"limit": None}, Rec).limit is None


def test_yaml_keeps_nan_for_validation_to_name_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("a: .nan\n")
    assert str(read_yaml(path, max_bytes=1000, max_nodes=10, finite=False)["a"]) == "nan"
    with pytest.raises(InputError, match=r"models\.yaml: not valid YAML: number nan is not finite"):
        read_yaml(path, max_bytes=1000, max_nodes=10)


@pytest.fixture
def imported(name: str) -> None:
    """The reader's modules imported before the test's deadline starts (a loaded host took longer than the deadline
    to import them the first time): one read of an empty file."""
    FILE_READERS[name]("")


@pytest.mark.parametrize("name", sorted(FILE_READERS))
def test_file_reader_regressions(name: str, tmp_path: Path, imported: None, deadline: None) -> None:
    for text in FILE_REGRESSIONS:
        t0 = time.perf_counter()
        out = FILE_READERS[name](text)  # an exception other than the reader's named error is a traceback in a run
        assert out is None or isinstance(out, str)
        assert time.perf_counter() - t0 < 5, (name, text[:60])


FILE_TEXT = st.one_of(
    st.text(max_size=400),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=30,
    ).map(lambda v: __import__("json").dumps(v)),
)


@pytest.mark.parametrize("name", sorted(FILE_READERS))
@given(text=FILE_TEXT)
def test_file_reader_fuzz(name: str, text: str) -> None:
    """Any file content is read or refused with the reader's own error naming the file, quickly (hypothesis, the
    "ci" profile; scripts/fuzz_readers.py --inputs runs the long one)."""
    t0 = time.perf_counter()
    out = FILE_READERS[name](text)
    assert out is None or isinstance(out, str)
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("name", VALID_READERS)
@given(data=st.data())
def test_valid_files_read_back_equal(name: str, data: st.DataObject) -> None:
    """The other half of the fuzz: a reader that refuses damaged files must still read every valid one, unchanged
    (a strict record that refused a valid value, or a bound set too tight, fails here)."""
    strategy, round_trip = valid_reader(name)
    value = data.draw(strategy)
    assert round_trip(value) == value
