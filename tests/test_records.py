import json
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from rig.decoding.constraint import Constraint
from rig.records import ChatRequest, Message, Sampling, ToolSpec, atomic_path, read_record, write_atomic, write_record


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


# Computed on the rig before Sampling gained min_p and repeat_penalty: a request hash is what a stored generation
# records and what the divergence pass's replay checks, so a new field must change none.
KNOWN_REQUEST = ChatRequest(
    messages=[Message(role="system", content="Route it."), Message(role="user", content="From A to B?")],
    tools=[ToolSpec(name="route", description="A route.", parameters={"type": "object", "properties": {"to": {}}})],
    tool_mode="json",
    constraint=Constraint(kind="json_schema", schema_={"type": "object"}),
    sampling=Sampling(temperature=0.7, top_p=0.9, top_k=40, max_tokens=128, seed=3, stop=["</s>"]),
)


def test_the_hash_of_a_known_request_is_unchanged_by_later_sampling_fields() -> None:
    assert KNOWN_REQUEST.digest() == "eefc8078554d7361"
    assert ChatRequest(messages=[Message(role="user", content="hi")]).digest() == "cf8ac93f723dfa35"
    for field, value in (("min_p", 0.05), ("repeat_penalty", 1.1)):  # set, a field is part of the request
        sampling = KNOWN_REQUEST.sampling.model_copy(update={field: value})
        assert KNOWN_REQUEST.model_copy(update={"sampling": sampling}).digest() != KNOWN_REQUEST.digest()
