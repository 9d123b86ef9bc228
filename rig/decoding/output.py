"""Turn constrained (or unconstrained) model text into a value, or say why it is not one."""

from __future__ import annotations

import json
import re
from typing import Any

from rig.decoding.constraint import Constraint
from rig.decoding.validate import validate

MAX_ERRORS = 5  # enough to see the pattern without flooding result records


def parse_output(text: str, constraint: Constraint) -> tuple[Any | None, str | None]:
    """``(value, None)`` when ``text`` satisfies ``constraint``, else ``(None, error)``.

    json_schema: ``json.loads``; yaml_schema: ``yaml.safe_load`` only (never the full loader); both then
    validated against the schema. regex: full match; choice: exact member; grammar: the text itself (no
    grammar engine is consulted here).
    """
    kind = constraint.kind
    if kind == "grammar":
        return text, None
    if kind == "regex":
        assert constraint.pattern is not None
        try:
            if re.fullmatch(constraint.pattern, text):
                return text, None
        except re.error as e:
            return None, f"invalid regex {constraint.pattern!r}: {e}"
        return None, f"output does not match regex {constraint.pattern!r}"
    if kind == "choice":
        assert constraint.choices is not None
        return (text, None) if text in constraint.choices else (None, f"output {text[:80]!r} is not one of the choices")
    if kind == "json_schema":
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
            return None, f"invalid JSON: {e}"
    else:
        import yaml

        try:
            value = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError) as e:
            return None, "invalid YAML: " + " ".join(str(e).split())
    errors = validate(value, constraint.schema_)
    if errors:
        more = f" (+{len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
        return None, "schema: " + "; ".join(errors[:MAX_ERRORS]) + more
    return value, None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads would otherwise accept NaN and Infinity
