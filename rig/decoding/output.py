"""Turn constrained (or unconstrained) model text into a value, or say why it is not one."""

from __future__ import annotations

import re
from typing import Any

from rig.decoding.constraint import Constraint
from rig.decoding.safe import load_json, load_yaml, too_long
from rig.decoding.validate import validate

MAX_ERRORS = 5  # enough to see the pattern without flooding result records


def parse_output(text: str, constraint: Constraint) -> tuple[Any | None, str | None]:
    """``(value, None)`` when ``text`` satisfies ``constraint``, else ``(None, error)``.

    json_schema and yaml_schema: the bounded loaders of ``rig.decoding.safe`` (YAML through a safe loader only),
    then validated against the schema. regex: full match; choice: exact member; grammar: the text itself (no
    grammar engine is consulted here).
    """
    kind = constraint.kind
    if kind == "grammar":
        return text, None
    if kind == "regex":
        assert constraint.pattern is not None
        if too_long(text):
            return None, too_long(text)
        try:
            if re.fullmatch(constraint.pattern, text):
                return text, None
        except re.error as e:
            return None, f"invalid regex {constraint.pattern!r}: {e}"
        return None, f"output does not match regex {constraint.pattern!r}"
    if kind == "choice":
        assert constraint.choices is not None
        return (text, None) if text in constraint.choices else (None, f"output {text[:80]!r} is not one of the choices")
    value, err = load_json(text) if kind == "json_schema" else load_yaml(text)
    if err is not None:
        return None, err
    errors = validate(value, constraint.schema_)
    if errors:
        more = f" (+{len(errors) - MAX_ERRORS} more)" if len(errors) > MAX_ERRORS else ""
        return None, "schema: " + "; ".join(errors[:MAX_ERRORS]) + more
    return value, None
