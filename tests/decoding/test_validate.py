"""rig.decoding.validate against hand-picked cases and, where installed, against jsonschema itself."""

from __future__ import annotations

import random

import pytest

from rig.decoding import validate
from rig.decoding.validate import json_equal
from tests.decoding.cases import SCHEMAS
from tests.decoding.sampling import mutate_value, sample

CASES: list[tuple[object, object, bool]] = [
    ({"type": "integer"}, 3, True),
    ({"type": "integer"}, 3.0, True),
    ({"type": "integer"}, True, False),
    ({"type": "number"}, False, False),
    ({"type": "string"}, None, False),
    ({"type": ["string", "null"]}, None, True),
    ({"enum": [1, "a"]}, True, False),
    ({"enum": [1, "a"]}, 1.0, True),
    ({"const": {"a": [1]}}, {"a": [1.0]}, True),
    ({"type": "object", "required": ["a"]}, {}, False),
    ({"additionalProperties": False}, {"x": 1}, False),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}, {"a": "s", "b": 2}, True),
    (
        {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
        {"a": "s", "b": "2"},
        False,
    ),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1}, [], False),
    ({"type": "array", "maxItems": 1}, [1, 2], False),
    ({"uniqueItems": True}, [1, 1.0], False),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 2, True),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 2, False),
    ({"allOf": [{"minimum": 1}, {"maximum": 3}]}, 4, False),
    ({"not": {"type": "null"}}, None, False),
    ({"type": "string", "pattern": "^a+$", "minLength": 2}, "aa", True),
    ({"maxLength": 1}, "ab", False),
    ({"exclusiveMinimum": 0}, 0, False),
    ({"multipleOf": 0.5}, 1.5, True),
    ({"$defs": {"p": {"type": "integer"}}, "items": {"$ref": "#/$defs/p"}}, [1, "x"], False),
    ({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}}, ["a", 1, 2], True),
    ({"type": "object"}, {True: 1}, False),
    (True, object(), True),
    (False, 1, False),
]


@pytest.mark.parametrize(("schema", "value", "ok"), CASES)
def test_cases(schema: object, value: object, ok: bool) -> None:
    errors = validate(value, schema)
    assert (errors == []) == ok, errors


def test_messages_name_the_path() -> None:
    errs = validate({"items": [{"id": "x"}]}, SCHEMAS["nested"])
    assert errs == ["$.items[0].id: expected integer, got string"]


def test_json_equal_distinguishes_booleans() -> None:
    assert json_equal(1, 1.0) and not json_equal(True, 1) and not json_equal([0], [False])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_agrees_with_jsonschema(name: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = SCHEMAS[name]
    checker = jsonschema.Draft202012Validator(schema)
    rng = random.Random(name)
    for _ in range(200):
        value = sample(schema, rng)
        if rng.random() < 0.7:
            value = mutate_value(value, rng)
        assert (validate(value, schema) == []) == checker.is_valid(value), value
    for schema2, value, ok in CASES:
        if schema2 is True and not isinstance(value, (dict, list, str, int, float, type(None))):
            continue
        if isinstance(value, dict) and any(not isinstance(k, str) for k in value):
            continue  # not JSON: jsonschema has no opinion on non-string keys
        assert jsonschema.Draft202012Validator(schema2).is_valid(value) == ok, (schema2, value)
