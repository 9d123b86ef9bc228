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
