"""Turn a raw model answer into an object, deterministically (no LLM repair).

Syntax validity follows the paper: the answer parses into an object. Like the upstream direct parse,
code fences are stripped and a Python-style single-quoted dict is accepted (by swapping quotes); unlike
it, valid JSON is tried first, so an apostrophe inside a JSON string is not a syntax error.
YAML goes through ``yaml.safe_load`` only, and must give a mapping (or list, for routing): a bare string
is what safe_load returns for prose, and is not a valid answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?|\n?\s*```\s*$")


def strip_fences(text: str) -> str:
    return _FENCE.sub("", text.strip()).strip()


def parse_answer(text: str, fmt: str, expect: type) -> tuple[Any, str | None]:
    """Return (value, None) or (None, reason)."""
    body = strip_fences(text)
    if not body:
        return None, "empty_output"
    if fmt == "yaml":
        try:
            value = yaml.safe_load(body)
        except yaml.YAMLError as e:
            return None, f"yaml_error: {str(e).splitlines()[0]}"
    else:
        value, err = None, None
        for candidate in (body, body.replace("'", '"')):
            try:
                value = json.loads(candidate)
                err = None
                break
            except json.JSONDecodeError as e:
                err = f"json_error: {e.msg} at line {e.lineno} column {e.colno}"
        if err:
            return None, err
    if not isinstance(value, expect):
        return None, f"not_a_{expect.__name__}: got {type(value).__name__}"
    return value, None
