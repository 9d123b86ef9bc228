"""Pins rig.decoding.validate's error lists word for word and in order: the first five reach the model (an invalid
final answer, a call envelope that fails its schema) and result records."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rig.decoding.validate import validate

OBJ = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "n": {"type": "integer", "minimum": 1, "maximum": 3},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2, "uniqueItems": True},
        "pt": {
            "type": "object",
            "properties": {"x": {"type": "number"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "n"],
    "additionalProperties": False,
}
NONE = "$: matches none of the {} alternatives"

CASES: list[tuple[str, Any, Any, list[str]]] = [
    ("valid", OBJ, {"name": "ab", "n": 2, "tags": ["a"], "pt": {"x": 1.5}}, []),
    ("every_required_missing", OBJ, {}, ["$: missing required key 'name'", "$: missing required key 'n'"]),
    ("null_is_a_value", OBJ, {"name": None, "n": 1}, ["$.name: expected string, got null"]),
    (
        "extras_in_value_order",
        OBJ,
        {"zz": 1, "name": 5, "yy": 2, "n": 0},
        [
            "$: unexpected key 'zz'",
            "$.name: expected string, got integer",
            "$: unexpected key 'yy'",
            "$.n: 0 < minimum 1",
        ],
    ),
    (
        "children_in_value_order",
        OBJ,
        {"n": 9, "name": "a"},
        ["$.n: 9 > maximum 3", "$.name: shorter than 2 characters"],
    ),
    (
        "items_before_counts",
        OBJ,
        {"name": "ab", "n": 1, "tags": [1, 2, 3]},
        [
            "$.tags[0]: expected string, got integer",
            "$.tags[1]: expected string, got integer",
            "$.tags[2]: expected string, got integer",
            "$.tags: more than 2 items",
        ],
    ),
    ("duplicates", OBJ, {"name": "ab", "n": 1, "tags": ["a", "a"]}, ["$.tags: items are not unique"]),
    (
        "nested_path",
        OBJ,
        {"name": "ab", "n": 1, "pt": {"x": "1", "y": 2}},
        ["$.pt.x: expected number, got string", "$.pt: unexpected key 'y'"],
    ),
    ("nested_missing", OBJ, {"name": "ab", "n": 1, "pt": {}}, ["$.pt: missing required key 'x'"]),
    ("too_long", {"type": "string", "minLength": 2, "maxLength": 3}, "abcd", ["$: longer than 3 characters"]),
    ("too_short", {"type": "string", "minLength": 2, "maxLength": 3}, "a", ["$: shorter than 2 characters"]),
    ("blanks_count", {"type": "string", "minLength": 2}, "  ", []),
    ("pattern", {"type": "string", "pattern": "^a+$"}, "ab", ["$: does not match pattern '^a+$'"]),
    ("no_length_cap", {"type": "string"}, "q" * 600, []),
    ("no_injection_check", {"type": "string"}, "x; drop table y", []),
    ("type_stops_the_node", {"type": "integer", "minimum": 5}, "x", ["$: expected integer, got string"]),
    ("type_list", {"type": ["string", "null"]}, 3, ["$: expected string or null, got integer"]),
    ("kind_array", {"type": "string"}, [None], ["$: expected string, got array"]),
    ("kind_null", {"type": "string"}, None, ["$: expected string, got null"]),
    ("kind_boolean", {"type": "string"}, True, ["$: expected string, got boolean"]),
    ("kind_integral_float", {"type": "string"}, 2.0, ["$: expected string, got integer"]),
    ("kind_number", {"type": "string"}, 2.5, ["$: expected string, got number"]),
    ("kind_object", {"type": "string"}, {}, ["$: expected string, got object"]),
    ("enum", {"enum": [1, "a"]}, True, ["$: True is not one of [1, 'a']"]),
    (
        "enum_long",
        {"enum": list(range(40))},
        "z" * 100,
        [
            "$: '" + "z" * 76 + "... is not one of "
            "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21..."
        ],
    ),
    ("const", {"const": {"a": [1]}}, {"a": [2]}, ["$: expected {'a': [1]}, got {'a': [2]}"]),
    ("const_equal", {"const": {"a": [1]}}, {"a": [1.0]}, []),
    (
        "bounds_all",
        {"minimum": 5, "maximum": 1, "exclusiveMinimum": 6, "exclusiveMaximum": 0, "multipleOf": 2},
        3,
        [
            "$: 3 < minimum 5",
            "$: 3 > maximum 1",
            "$: 3 <= exclusiveMinimum 6",
            "$: 3 >= exclusiveMaximum 0",
            "$: 3 is not a multiple of 2",
        ],
    ),
    ("exclusive_bool_ignored", {"exclusiveMinimum": True}, 0, []),
    ("multiple_float", {"multipleOf": 0.5}, 1.25, ["$: 1.25 is not a multiple of 0.5"]),
    ("infinite_number", {"type": "number", "maximum": 10}, math.inf, ["$: inf > maximum 10"]),
    ("infinite_untyped", {"minimum": 0}, -math.inf, ["$: -inf < minimum 0"]),
    (
        "all_of",
        {"allOf": [{"minimum": 1}, {"maximum": 3}, {"type": "integer"}]},
        4.5,
        ["$: 4.5 > maximum 3", "$: expected integer, got number"],
    ),
    ("any_of", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, [NONE.format("anyOf")]),
    ("one_of_none", {"oneOf": [{"type": "string"}, {"type": "boolean"}]}, 1, [NONE.format("oneOf")]),
    (
        "one_of_many",
        {"oneOf": [{"type": "number"}, {"type": "integer"}]},
        2,
        ["$: matches 2 oneOf alternatives, expected exactly one"],
    ),
    ("not", {"not": {"type": "null"}}, None, ["$: must not match the 'not' schema"]),
    ("false_schema", False, 1, ["$: no value is allowed here"]),
    ("false_property", {"properties": {"a": False}}, {"a": 1}, ["$.a: no value is allowed here"]),
    ("true_schema", True, {"a": 1}, []),
    ("empty_schema", {}, [1], []),
    (
        "non_string_keys",
        {"type": "object", "required": ["a"], "additionalProperties": False},
        {1: "x", None: 2},
        [
            "$: key 1 is not a string",
            "$: key None is not a string",
            "$: missing required key 'a'",
            "$: unexpected key 1",
            "$: unexpected key None",
        ],
    ),
    (
        "pattern_properties",
        {"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        {"xa": "1", "b": 2, "xc": 3},
        ["$.xa: expected integer, got string", "$.b: expected string, got integer"],
    ),
    (
        "property_names",
        {"propertyNames": {"maxLength": 2}},
        {"abc": 1, "ab": 2},
        ["$.abc(name): longer than 2 characters"],
    ),
    ("min_properties", {"minProperties": 2}, {"a": 1}, ["$: fewer than 2 keys"]),
    ("max_properties", {"maxProperties": 1}, {"a": 1, "b": 2}, ["$: more than 1 keys"]),
    (
        "prefix_items",
        {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
        [1, "a", 2],
        ["$[0]: expected string, got integer", "$[1]: expected integer, got string"],
    ),
    (
        "tuple_items",
        {"items": [{"type": "string"}], "additionalItems": False},
        ["a", 1],
        ["$[1]: no value is allowed here"],
    ),
    ("contains", {"contains": {"type": "string"}, "minContains": 2}, ["a", 1], ["$: 'contains' matched 1 items"]),
    ("contains_max", {"contains": {"type": "string"}, "maxContains": 1}, ["a", "b"], ["$: 'contains' matched 2 items"]),
    (
        "array_all",
        {"items": {"type": "integer"}, "minItems": 4, "maxItems": 1, "uniqueItems": True},
        [1, 1.0, "x"],
        [
            "$[2]: expected integer, got string",
            "$: fewer than 4 items",
            "$: more than 1 items",
            "$: items are not unique",
        ],
    ),
    ("unique_json_equal", {"uniqueItems": True}, [1, 1.0], ["$: items are not unique"]),
    ("unique_bool_is_not_int", {"uniqueItems": True}, [1, True], []),
    ("unique_objects", {"uniqueItems": True}, [{"a": 1, "b": 2}, {"b": 2, "a": 1}], ["$: items are not unique"]),
    (
        "ref",
        {"$defs": {"p": {"type": "integer"}}, "items": {"$ref": "#/$defs/p"}},
        [1, "x"],
        ["$[1]: expected integer, got string"],
    ),
    (
        "ref_then_siblings",
        {"$defs": {"p": {"minimum": 5}}, "$ref": "#/$defs/p", "maximum": 1},
        3,
        ["$: 3 < minimum 5", "$: 3 > maximum 1"],
    ),
    (
        "ref_to_root",
        {"type": "object", "properties": {"kid": {"$ref": "#"}}, "required": ["v"]},
        {"v": 1, "kid": {"kid": {}}},
        ["$.kid: missing required key 'v'", "$.kid.kid: missing required key 'v'"],
    ),
    ("format_is_an_annotation", {"type": "string", "format": "email"}, "not an email", []),
    ("unknown_keyword_ignored", {"frobnicate": 1}, 3, []),
]


@pytest.mark.parametrize(("schema", "value", "errors"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_errors(schema: Any, value: Any, errors: list[str]) -> None:
    assert validate(value, schema) == errors


def test_root_resolves_refs_of_a_subschema() -> None:
    root = {"$defs": {"n": {"type": "integer"}}}
    assert validate("x", {"$ref": "#/$defs/n"}, root=root) == ["$: expected integer, got string"]


def test_bad_schemas_raise() -> None:
    with pytest.raises(TypeError, match=r"schema at \$\.a is not an object or boolean: 3"):
        validate({"a": 1}, {"properties": {"a": 3}})
    with pytest.raises(ValueError, match="only local \\$ref is supported"):
        validate(1, {"$ref": "http://x/y"})
    with pytest.raises(ValueError, match="does not resolve"):
        validate(1, {"$ref": "#/$defs/missing"})
