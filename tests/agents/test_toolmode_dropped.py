"""Pins which schema keywords the json / yaml tool modes drop from the call envelope (the executor checks them)."""

from __future__ import annotations

from rig.agents.toolmode import grammar_safe

KEYWORDS = [
    *("type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems"),
    *("additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"),
    *("minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
    *("multipleOf", "minProperties", "maxProperties", "patternProperties", "propertyNames", "dependencies"),
    *("dependentRequired", "dependentSchemas", "if", "then", "else", "not", "anyOf", "oneOf", "allOf", "$ref"),
    *("$defs", "definitions", "unevaluatedProperties", "unevaluatedItems", "title", "description", "default"),
    *("examples", "deprecated", "readOnly", "writeOnly", "nullable", "$comment"),
]
DROPPED = {
    *("pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems"),
    *("minProperties", "maxProperties", "patternProperties", "propertyNames", "format", "default", "examples"),
}


def test_dropped_keywords() -> None:
    assert {k for k in KEYWORDS if grammar_safe({k: 1, "x-kept": 0}) == {"x-kept": 0}} == DROPPED


def test_arguments_named_like_keywords_are_kept() -> None:
    schema = {
        "type": "object",
        "properties": {
            "minimum": {"type": "number", "minimum": 0},
            "pattern": {"type": "string", "pattern": "^a"},
            "default": {"type": "boolean", "default": False},
        },
        "required": ["minimum", "pattern"],
    }
    assert grammar_safe(schema) == {
        "type": "object",
        "properties": {"minimum": {"type": "number"}, "pattern": {"type": "string"}, "default": {"type": "boolean"}},
        "required": ["minimum", "pattern"],
    }


def test_dropping_pattern_properties_never_narrows() -> None:
    closed = {"type": "object", "patternProperties": {"^x_": {"type": "string"}}, "additionalProperties": False}
    assert grammar_safe(closed) == {"type": "object"}  # x_ keys stay writable; the executor checks them
    plain = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    assert grammar_safe(plain) == plain
