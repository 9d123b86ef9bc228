"""Turn a raw model answer into an object, deterministically (no LLM repair).

Syntax validity follows the paper: the answer parses into an object. Like the upstream direct parse,
code fences are stripped and a Python-style single-quoted dict is accepted (by swapping quotes); unlike
it, valid JSON is tried first, so an apostrophe inside a JSON string is not a syntax error.
YAML goes through the bounded safe loader of ``rig.decoding.safe`` only, and must give a mapping (or list, for
routing): a bare string is what a YAML loader returns for prose, and is not a valid answer.
"""

from __future__ import annotations

from typing import Any

from rig.decoding.safe import load_json, load_yaml, strip_fences

__all__ = ["parse_answer", "strip_fences"]


def parse_answer(text: str, fmt: str, expect: type) -> tuple[Any, str | None]:
    """Return (value, None) or (None, reason)."""
    body = strip_fences(text)
    if not body:
        return None, "empty_output"
    if fmt == "yaml":
        value, err = load_yaml(body)
        if err:
            return None, "yaml_error: " + err.removeprefix("invalid YAML: ")
    else:
        value, err = load_json(body)
        if err:
            swapped, err2 = load_json(body.replace("'", '"'))
            if err2 is None:
                value, err = swapped, None
            else:
                return None, "json_error: " + err2.removeprefix("invalid JSON: ")
    if not isinstance(value, expect):
        return None, f"not_a_{expect.__name__}: got {type(value).__name__}"
    return value, None
