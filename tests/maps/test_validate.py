import pytest

from rig.maps.validate import ArgumentError, validate


def test_json_types_not_python_ones() -> None:
    with pytest.raises(ArgumentError, match="expected integer"):
        validate(True, {"type": "integer"})  # bool is an int in Python, never in JSON
    with pytest.raises(ArgumentError, match="not one of"):
        validate(True, {"enum": [1, 2]})
    assert validate(3.0, {"type": "integer"}) == 3 and isinstance(validate(3.0, {"type": "integer"}), int)


def test_cleaned_copy_and_first_error() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 1}, "n": {"type": "integer", "default": 5, "minimum": 1}},
        "required": ["q"],
        "additionalProperties": False,
    }
    assert validate({"q": "cafe"}, schema) == {"q": "cafe", "n": 5}
    with pytest.raises(ArgumentError, match=r"\$\.n: 0 is below the minimum 1"):
        validate({"q": "cafe", "n": 0}, schema)
    with pytest.raises(ArgumentError, match="unexpected argument"):
        validate({"q": "cafe", "x": 1}, schema)
