"""Tool calls written into message text instead of a structured field: ``<tool_call>{json}</tool_call>``
(Hermes / Qwen), a fenced or bare JSON object, or a list of them, each with ``name`` and ``arguments``."""

from __future__ import annotations

from typing import Any

from rig.decoding.safe import blocks, check_value, load_json, too_long
from rig.records import ParsedCall, ParseStatus


def parse_arguments(value: Any) -> dict[str, Any] | None:
    """A call's arguments, given as an object or as JSON text (OpenAI style); None unless they are an object."""
    if isinstance(value, str):
        value, _ = load_json(value)
    elif check_value(value) is not None:  # a server's parsed arguments get the same bounds as text
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
    if too_long(text):
        return [], "parse_error"
    tagged = [text[a:b].strip() for a, b, _ in blocks(text, "<tool_call>", "</tool_call>")]
    if tagged:
        calls: list[ParsedCall] = []
        for body in tagged:
            value, err = load_json(body)
            call = None if err else _call_from_obj(value)
            if call is None:
                return calls, "parse_error"
            calls.append(call)
        return calls, "ok"
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        stripped = stripped[3:-3].removeprefix("json").strip()
    if not stripped.startswith(("{", "[")):
        return None
    value, err = load_json(stripped)
    if err:
        return None
    items = value if isinstance(value, list) else [value]
    parsed = [_call_from_obj(x) for x in items]
    if not items or any(p is None for p in parsed):
        return None
    return [p for p in parsed if p is not None], "ok"
