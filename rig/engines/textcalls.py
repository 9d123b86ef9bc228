"""Tool calls written into message text instead of a structured field: ``<tool_call>{json}</tool_call>``
(Hermes / Qwen), a fenced or bare JSON object, or a list of them, each with ``name`` and ``arguments``."""

from __future__ import annotations

import json
import re
from typing import Any

from rig.records import ParsedCall, ParseStatus

_TAGGED_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_arguments(value: Any) -> dict[str, Any] | None:
    """A call's arguments, given as an object or as JSON text (OpenAI style); None unless they are an object."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, dict) else None


def _call_from_obj(obj: Any) -> ParsedCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = parse_arguments(obj.get("arguments", obj.get("parameters")))
    return None if args is None else ParsedCall(name=obj["name"], arguments=args)


def calls_from_text(text: str) -> tuple[list[ParsedCall], ParseStatus] | None:
    """Tool calls a server left in the message text: ``<tool_call>{json}</tool_call>`` (Hermes/Qwen) or a bare JSON
    object / list of objects with ``name`` and ``arguments``. None when the text does not look like a call."""
    tagged = _TAGGED_CALL.findall(text)
    if tagged:
        calls: list[ParsedCall] = []
        for body in tagged:
            try:
                call = _call_from_obj(json.loads(body))
            except json.JSONDecodeError:
                call = None
            if call is None:
                return calls, "parse_error"
            calls.append(call)
        return calls, "ok"
    stripped = text.strip()
    m = _FENCE.match(stripped)
    stripped = m.group(1) if m else stripped
    if not stripped.startswith(("{", "[")):
        return None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    items = value if isinstance(value, list) else [value]
    parsed = [_call_from_obj(x) for x in items]
    if not items or any(p is None for p in parsed):
        return None
    return [p for p in parsed if p is not None], "ok"
