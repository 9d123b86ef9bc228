"""The tool-mode axis: how tools are offered to a model and how its calls are read back.

- ``native``: the tools go to the engine (the chat template's tool section, a server's ``tools`` field) and the
  engine's parsed calls are used; a call left in the text (``<tool_call>{...}</tool_call>`` or bare JSON) is
  accepted too, since many templates produce exactly that.
- ``prompt``: the tools are described in the system prompt; the model writes one JSON call; nothing constrains it.
- ``json`` / ``yaml``: as ``prompt``, and the output is constrained to the call envelope
  ``{"name": <tool>, "arguments": {...}}`` of the offered tools, written as JSON or as block YAML.

In the prompt-based modes a reply that is one JSON object naming an offered tool, with that tool's arguments beside
the name instead of under ``arguments`` (``{"name": "final_answer", "answer": ...}``: Qwen2.5-Coder 1.5B's final
answers on MobilityBench), is read as that call, form ``flat``. Only the loop knows the offered tools, so only it
reads this form; the engines' readers (``rig/engines/textcalls.py``) take such an object for data.

The envelope schema keeps only what a grammar can enforce (types, enums, required keys, lengths); numeric ranges and
the like are left to the tool executor, which validates every call and answers a bad one with a tool error.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, get_args

from rig.decoding.constraint import Constraint
from rig.decoding.output import parse_output
from rig.decoding.safe import load_json, strip_fences
from rig.decoding.schema import UNENFORCEABLE
from rig.engines.textcalls import calls_from_text
from rig.records import CallForm, Generation, Message, ParsedCall, ParseStatus, ToolMode, ToolSpec

TOOL_MODES: tuple[str, ...] = get_args(ToolMode)

# Dropped from the envelope (the executor checks every call): what a grammar cannot enforce, and three annotations.
_UNGRAMMATICAL = UNENFORCEABLE | {"format", "default", "examples"}


def effective_mode(mode: str, engine: Any) -> str:
    """``native`` on an engine whose template cannot show tool definitions becomes ``prompt`` (the tools are
    described in the system prompt instead of vanishing); every other mode is served as asked. Record the result
    beside the requested mode."""
    if mode == "native" and not engine.capabilities.native_tools:
        return "prompt"
    return mode


# Keywords whose value maps names (a tool's own argument names) to schemas: the names are data, never keywords.
_NAMED_SCHEMAS = ("properties", "$defs", "definitions", "dependentSchemas")


def grammar_safe(schema: Any) -> Any:
    """The schema without the keywords a grammar cannot enforce (the executor still checks them). An argument that
    happens to be called ``minimum`` or ``pattern`` stays; and where ``patternProperties`` is dropped from an object
    closed by ``additionalProperties: false``, the object is opened instead, so that dropping only widens what the
    grammar lets through (arguments the pattern allowed must still be writable)."""
    if isinstance(schema, list):
        return [grammar_safe(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k in _UNGRAMMATICAL:
            continue
        if k in ("enum", "const"):
            out[k] = v
        elif k in _NAMED_SCHEMAS and isinstance(v, dict):
            out[k] = {name: grammar_safe(sub) for name, sub in v.items()}
        else:
            out[k] = grammar_safe(v)
    if "patternProperties" in schema and schema.get("additionalProperties") is False:
        del out["additionalProperties"]
    return out


def envelope_schema(tools: list[ToolSpec]) -> dict[str, Any]:
    """One call to one of ``tools``: ``{"name": ..., "arguments": {...}}``, arguments checked per tool."""
    alts = [
        {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": [t.name]}, "arguments": grammar_safe(t.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    return alts[0] if len(alts) == 1 else {"anyOf": alts}


def constraint_for(tools: list[ToolSpec], mode: str) -> Constraint | None:
    if mode == "json":
        return Constraint(kind="json_schema", schema_=envelope_schema(tools))
    if mode == "yaml":
        return Constraint(kind="yaml_schema", schema_=envelope_schema(tools))
    return None


def tools_prompt(tools: list[ToolSpec], mode: str) -> str:
    """The tool list and reply format for the prompt-based modes (``prompt``, ``json``, ``yaml``)."""
    lines = ["You can call these tools:"]
    for t in tools:
        lines.append(
            f"- {t.name}: {t.description}\n  arguments (JSON schema): "
            f"{json.dumps(t.parameters, ensure_ascii=False, separators=(',', ':'))}"
        )
    if mode == "yaml":
        lines.append(
            "Reply with exactly one tool call as a YAML document and nothing else, for example:\n"
            f'name: "{tools[0].name}"\narguments:\n  key: "value"'
        )
    else:
        lines.append(
            "Reply with exactly one tool call as a JSON object and nothing else, for example:\n"
            f'{{"name": "{tools[0].name}", "arguments": {{"key": "value"}}}}'
        )
    return "\n".join(lines)


def prepare(
    messages: list[Message], tools: list[ToolSpec], mode: str
) -> tuple[list[Message], list[ToolSpec], Constraint | None]:
    """Messages, request tools and constraint for one request in ``mode``. Prompt-based modes append the tool
    list to the system message (or add one), so a benchmark's own instructions stay first."""
    if mode not in TOOL_MODES:
        raise ValueError(f"unknown tool mode {mode!r}; use one of {', '.join(TOOL_MODES)}")
    if mode == "native":
        return list(messages), list(tools), None
    block = tools_prompt(tools, mode)
    msgs = list(messages)
    if msgs and msgs[0].role == "system":
        msgs[0] = msgs[0].model_copy(update={"content": msgs[0].content.rstrip() + "\n\n" + block})
    else:
        msgs.insert(0, Message(role="system", content=block))
    return msgs, [], constraint_for(tools, mode)


class Extracted(NamedTuple):
    calls: list[ParsedCall]
    status: ParseStatus
    why: str | None  # why there is no call; None when there is one
    form: CallForm | None  # how the model wrote the calls (None: no call read)


def extract_calls(gen: Generation, tools: list[ToolSpec], mode: str) -> Extracted:
    """The calls in a generation, a parse status, when there are none why, and the form they were written in."""
    envelope = constraint_for(tools, mode)  # set for the json and yaml modes
    if envelope is not None:
        value, err = parse_output(gen.text.strip(), envelope)
        if err is not None:
            return Extracted([], "parse_error", err, None)
        assert value is not None  # the envelope schema admits only objects
        call = ParsedCall(name=value["name"], arguments=value.get("arguments") or {})
        return Extracted([call], "ok", None, "yaml" if mode == "yaml" else "bare")
    if mode == "native" and gen.tool_calls:
        return Extracted(list(gen.tool_calls), "ok", None, gen.call_form or "native")
    found = calls_from_text(gen.text)
    if found is None:
        flat = _flat_call(gen.text, tools)
        if flat is not None:
            return Extracted([flat], "ok", None, "flat")
        return Extracted([], "no_call", "no tool call in the reply", None)
    calls, status, form = found
    if status != "ok" or not calls:
        return Extracted(calls, status if status != "ok" else "no_call", "a tool call could not be parsed", form)
    return Extracted(calls, "ok", None, form)


def _flat_call(text: str, tools: list[ToolSpec]) -> ParsedCall | None:
    """The whole reply (bare or in one fence) as one object whose ``name`` is an offered tool and whose other keys are
    its arguments; None for anything else, so data that happens to have a ``name`` is never taken for a call."""
    value, err = load_json(strip_fences(text.strip()))
    if err or not isinstance(value, dict) or len(value) < 2:
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in {t.name for t in tools}:  # a list or object here is data, not a name
        return None
    if {"arguments", "parameters", "function"} & set(value):  # the usual envelope, which the text reader judged
        return None
    return ParsedCall(name=name, arguments={k: v for k, v in value.items() if k != "name"})


def read_calls(gen: Generation, tools: list[ToolSpec], mode: str) -> Extracted:
    """``extract_calls``, recorded on the generation: its calls, parse status and call form."""
    found = extract_calls(gen, tools, mode)
    gen.tool_calls, gen.parse_status, gen.call_form = found.calls, found.status, found.form if found.calls else None
    return found


def assistant_turn(gen: Generation, calls: list[ParsedCall]) -> Message:
    """What the model said, for the next request's history (the calls as JSON when the text is empty)."""
    text = gen.text.strip()
    if not text and calls:
        text = json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], ensure_ascii=False)
    return Message(role="assistant", content=text)


def observation(name: str, payload: Any, mode: str, limit: int = 4000) -> Message:
    """A tool's answer as the next message. ``native`` uses the tool role; the prompt-based modes a user turn,
    which every chat template accepts. Long answers are cut at ``limit`` characters, marked as cut."""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if len(text) > limit:
        text = text[:limit] + f" ... [cut: {len(text) - limit} more characters]"
    if mode == "native":
        return Message(role="tool", name=name, content=text)
    return Message(role="user", content=f"Result of {name}: {text}")
