"""Tool calls written into message text instead of a structured field, in the forms real models write them.

Forms, tried in this order (``CallForm``, recorded on each generation):

- ``tagged``: ``<tool_call>{json}</tool_call>`` (Hermes / Qwen), one block per call; the last block may be left
  unclosed when the model stopped right after its JSON, and a block may wrap its JSON in a code fence;
- ``other_tag``: the same inside another tag a model borrows from its template (Qwen2.5-Coder 1.5B writes each call
  in ``<tools>`` blocks, the tag its template lists the tool definitions in, or one block with a call per line),
  which a Hermes parser does not read;
- ``bare``: the whole reply is one JSON call, or a list of them;
- ``fenced``: calls in Markdown code fences (```json ... ```), with or without prose around them;
- ``prose``: a JSON call object inside other text ("I will call ... {"name": ...}").

A call is an object with a name and its arguments: ``{"name", "arguments"}`` (also ``parameters``), OpenAI's
``{"type": "function", "function": {"name", "arguments"}}``, and ``{"tool_calls": [...]}`` around several; the
arguments an object or JSON text. An object with a name and nothing else is a call without arguments.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rig.decoding.safe import blocks, check_value, load_json, object_spans, strip_fences, too_long
from rig.records import CallForm, ParsedCall, ParseStatus

# Tags other than <tool_call> that models were seen to wrap calls in.
OTHER_TAGS = (("<tools>", "</tools>"),)
MAX_CALLS = 32  # calls read from one reply; the loop runs one per turn, so more are only recorded as skipped
_ARGUMENT_KEYS = ("arguments", "parameters")


class TextCalls(NamedTuple):
    """The calls found in a reply's text, whether they all parsed, and the form they were written in."""

    calls: list[ParsedCall]
    status: ParseStatus
    form: CallForm | None  # None: a reply refused before any form was read


def parse_arguments(value: Any) -> dict[str, Any] | None:
    """A call's arguments, given as an object or as JSON text (OpenAI style); None unless they are an object."""
    if isinstance(value, str):
        value, _ = load_json(value)
    elif check_value(value) is not None:  # a server's parsed arguments get the same bounds as text
        return None
    return value if isinstance(value, dict) else None


def _call_from_obj(obj: Any) -> ParsedCall | None:
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):  # OpenAI's {"type": "function", ...}
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"].strip():
        return None
    key = next((k for k in _ARGUMENT_KEYS if k in obj), None)
    if key is None:  # a name alone is a call without arguments; a name among other fields is data, not a call
        return ParsedCall(name=obj["name"].strip(), arguments={}) if len(obj) == 1 else None
    args = parse_arguments(obj[key])
    return None if args is None else ParsedCall(name=obj["name"].strip(), arguments=args)


def calls_in_value(value: Any) -> list[ParsedCall] | None:
    """The calls a loaded JSON value holds: one call, a list of calls, or ``{"tool_calls": [...]}``; None when it is
    not (only) calls, so a final answer that is a list of places is never mistaken for calls."""
    if isinstance(value, dict) and set(value) <= {"tool_calls", "role", "content"} and "tool_calls" in value:
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    calls = [_call_from_obj(x) for x in items[:MAX_CALLS]]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _load_calls(text: str) -> list[ParsedCall] | None:
    value, err = load_json(text)
    return None if err else calls_in_value(value)


def _tagged(text: str, start: str, end: str, form: CallForm) -> TextCalls | None:
    found = blocks(text, start, end)
    if not found:
        return None
    calls: list[ParsedCall] = []
    for a, b, _closed in found:
        got = _load_calls(strip_fences(text[a:b]))
        if got is None and form == "other_tag":  # one block of calls a line each (the 1.5B's, cut at max_tokens)
            got = _prose(text[a:b]) or None
        if got is None:  # a block that is not a call (or was cut): the model meant a call and wrote it wrong
            return TextCalls(calls, "parse_error", form)
        calls.extend(got)
        if len(calls) >= MAX_CALLS:
            break
    return TextCalls(calls[:MAX_CALLS], "ok", form)


def _fenced(text: str) -> list[ParsedCall]:
    calls: list[ParsedCall] = []
    for a, b, _closed in blocks(text, "```", "```"):
        body = text[a:b]
        lang = len(body) - len(body.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        calls.extend(_load_calls(body[lang:]) or [])  # a fence of code or data that is no call is skipped
        if len(calls) >= MAX_CALLS:
            break
    return calls[:MAX_CALLS]


def _prose(text: str) -> list[ParsedCall]:
    calls: list[ParsedCall] = []
    for a, b in object_spans(text):
        calls.extend(_load_calls(text[a:b]) or [])
        if len(calls) >= MAX_CALLS:
            break
    return calls[:MAX_CALLS]


def calls_from_text(text: str) -> TextCalls | None:
    """Tool calls a model left in its message text (module docstring: forms and shapes). None when the text holds
    no call; a ``parse_error`` status when a tagged block does not hold one, or a reply that opens a JSON call
    does not parse."""
    if too_long(text):
        return TextCalls([], "parse_error", None)
    tagged = _tagged(text, "<tool_call>", "</tool_call>", "tagged")
    for start, end in OTHER_TAGS:
        tagged = tagged or (_tagged(text, start, end, "other_tag") if start in text else None)
    if tagged is not None:
        return tagged
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        value, err = load_json(stripped)
        calls = None if err else calls_in_value(value)
        if calls is not None:
            return TextCalls(calls, "ok", "bare")
    # a reply that is one JSON call that does not parse (unclosed, cut at max_tokens), bare or in a fence
    body = strip_fences(stripped)
    broken = body.startswith("{") and '"name"' in body and load_json(body)[1] is not None
    if "```" in text:
        calls = _fenced(text)
        if calls:
            return TextCalls(calls, "ok", "fenced")
    calls = _prose(text)
    if calls:
        return TextCalls(calls, "ok", "prose")
    return TextCalls([], "parse_error", "fenced" if stripped.startswith("```") else "bare") if broken else None
