"""Output constraints: one ``Constraint`` type, turned into whatever grammar an engine takes.

``to_gbnf`` feeds llama.cpp (and xgrammar/vLLM, whose EBNF is GBNF but for greedy ``\\x`` escapes, which the
emitter keeps unambiguous), ``to_lark`` feeds llguidance (outlines, vLLM's guidance backend); ``parse_output``
checks what came back. Engine packages are imported lazily, only where a conversion needs one.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from rig.decoding.constraint import Constraint
from rig.decoding.gbnf import json_schema_to_gbnf
from rig.decoding.ir import Grammar, Lit, alt
from rig.decoding.lark import json_schema_to_lark, yaml_schema_to_lark
from rig.decoding.output import parse_output
from rig.decoding.regex import regex_to_ir
from rig.decoding.schema import SchemaError, UnsupportedSchema
from rig.decoding.validate import validate
from rig.decoding.yaml_gbnf import yaml_schema_to_gbnf

__all__ = [
    "Constraint",
    "SchemaError",
    "UnsupportedSchema",
    "json_schema_to_gbnf",
    "json_schema_to_lark",
    "parse_output",
    "to_gbnf",
    "to_lark",
    "validate",
    "yaml_schema_to_gbnf",
    "yaml_schema_to_lark",
]


def to_gbnf(constraint: Constraint) -> str:
    """GBNF for llama.cpp. Raises NotImplementedError for regexes outside rig.decoding.regex's subset."""
    return _convert("gbnf", constraint.kind, _payload(constraint))


def to_lark(constraint: Constraint) -> str:
    """Lark (llguidance dialect). A raw GBNF ``grammar`` constraint is converted with llguidance."""
    return _convert("lark", constraint.kind, _payload(constraint))


def _payload(c: Constraint) -> str:
    # Order-preserving JSON: property order decides key order in the generated grammar.
    return {
        "json_schema": lambda: json.dumps(c.schema_),
        "yaml_schema": lambda: json.dumps(c.schema_),
        "grammar": lambda: c.grammar,
        "regex": lambda: c.pattern,
        "choice": lambda: json.dumps(c.choices),
    }[c.kind]()  # type: ignore[return-value]


@lru_cache(maxsize=256)  # engines ask once per request; a benchmark reuses a handful of schemas
def _convert(fmt: str, kind: str, payload: str) -> str:
    if kind in ("json_schema", "yaml_schema"):
        schema = json.loads(payload)
        fn = {
            ("gbnf", "json_schema"): json_schema_to_gbnf,
            ("gbnf", "yaml_schema"): yaml_schema_to_gbnf,
            ("lark", "json_schema"): json_schema_to_lark,
            ("lark", "yaml_schema"): yaml_schema_to_lark,
        }
        return fn[(fmt, kind)](schema)
    if kind == "grammar":
        return payload if fmt == "gbnf" else _gbnf_to_lark(payload)
    expr = regex_to_ir(payload) if kind == "regex" else alt(*(Lit(c) for c in json.loads(payload)))
    g = Grammar()
    return g.emit_gbnf(expr) if fmt == "gbnf" else g.emit_lark(expr)


def _gbnf_to_lark(text: str) -> str:
    if re.search(r"(?m)^\s*(%llguidance\b|start\s*:)", text):
        return text  # already Lark
    try:
        from llguidance.gbnf_to_lark import gbnf_to_lark
    except ImportError:
        raise NotImplementedError(
            "converting a raw GBNF grammar to Lark needs llguidance "
            "(pip install llguidance); or pass the grammar in Lark syntax"
        ) from None
    return gbnf_to_lark(text)
