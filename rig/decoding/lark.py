"""The same grammars as GBNF, in llguidance's Lark dialect (what outlines' CFG type and vLLM's guidance
backend take). Regular sub-grammars become terminals so llguidance's greedy lexer sees no ambiguity.
The dialect uses ``x{m,n}`` repetition, which python-lark itself does not parse."""

from __future__ import annotations

from typing import Any

from rig.decoding.gbnf import build_json_grammar
from rig.decoding.prims import ANY_DEPTH
from rig.decoding.yaml_gbnf import build_yaml_grammar


def json_schema_to_lark(
    schema: dict[str, Any] | bool, *, strict: bool = True, any_depth: int | None = ANY_DEPTH
) -> str:
    """Lark grammar accepting JSON text whose value validates against ``schema`` (options as for GBNF)."""
    g, root = build_json_grammar(schema, strict=strict, any_depth=any_depth)
    return g.emit_lark(root)


def yaml_schema_to_lark(schema: dict[str, Any] | bool, *, strict: bool = True, any_depth: int = ANY_DEPTH) -> str:
    """Lark grammar for the block-YAML layout of rig.decoding.yaml_gbnf."""
    g, root = build_yaml_grammar(schema, strict=strict, any_depth=any_depth)
    return g.emit_lark(root)
