import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from rig.records import Sampling, atomic_path, read_record, write_atomic, write_record


class Rec(BaseModel):
    x: float


def test_a_record_that_would_not_read_back_is_not_written(tmp_path: Path) -> None:
    """A NaN or infinity is written to JSON as null, which the record then refuses: never write such a file, and leave
    the one already there whole."""
    path = tmp_path / "r.json"
    write_record(path, Rec(x=1.5))
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match=f"{path}: not written, it would not read back \\(x: "):
            write_record(path, Rec(x=bad))
    assert json.loads(path.read_text()) == {"x": 1.5}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


class Capped(BaseModel):
    x: float

    @model_validator(mode="after")
    def _capped(self) -> "Capped":  # a check of the record as a whole: its error has no field path
        if self.x > 5:
            raise ValueError("x above the cap")
        return self


def test_an_error_of_the_whole_record_names_the_whole_file(tmp_path: Path) -> None:
    """A file that holds a list (or a record failing a check across its fields) has no field to name: the message
    says so instead of printing an empty path (": Input should be an object")."""
    path = tmp_path / "settings.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError) as e:
        read_record(path, Rec)
    assert str(e.value) == f"{path}: the whole file: Input should be an object"
    with pytest.raises(ValueError) as e:
        write_record(path, Capped.model_construct(x=6.0))
    assert str(e.value) == f"{path}: not written, it would not read back (the whole file: Value error, x above the cap)"
    path.write_text('{"x": "many"}')  # a field keeps its path
    with pytest.raises(ValueError, match=f"^{path}: x: Input should be a valid number"):
        read_record(path, Rec)


def test_sampling_refuses_non_finite_values() -> None:
    for field in ("temperature", "top_p"):
        with pytest.raises(ValidationError, match="finite"):
            Sampling.model_validate({field: float("nan")})


def test_atomic_path_keeps_the_old_file_on_error(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    write_atomic(path, "whole")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("hal")
        raise RuntimeError("stopped mid-write")
    assert path.read_text() == "whole" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    write_atomic(path, b"bytes")
    assert path.read_bytes() == b"bytes"


def test_call_form_is_additive() -> None:
    """Generations stored before rig recorded the call form read as None; a recorded one round-trips."""
    from rig.records import Generation

    old = {"request_hash": "h", "text": "x", "parse_status": "ok", "tool_calls": [{"name": "f", "arguments": {}}]}
    assert Generation.model_validate(old).call_form is None
    g = Generation(request_hash="h", call_form="fenced")
    assert Generation.model_validate_json(g.model_dump_json()).call_form == "fenced"
