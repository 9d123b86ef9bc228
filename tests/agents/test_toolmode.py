"""The tool-mode axis: request preparation and call extraction for native, prompt, json and yaml."""

from __future__ import annotations

import json

import pytest

from rig.agents.toolmode import (
    constraint_for,
    envelope_schema,
    extract_calls,
    grammar_safe,
    observation,
    prepare,
    read_calls,
)
from rig.decoding import to_gbnf, validate
from rig.records import Generation, Message, ParsedCall, ToolSpec

ROUTE = ToolSpec(
    name="route",
    description="Route between two points.",
    parameters={
        "type": "object",
        "additionalProperties": False,
        "required": ["lat", "lon"],
        "properties": {
            "lat": {"type": "number", "minimum": -90, "maximum": 90},
            "lon": {"type": "number", "minimum": -180, "maximum": 180},
            "mode": {"type": "string", "enum": ["walk", "drive"], "default": "walk"},
        },
    },
)
FINISH = ToolSpec(
    name="finish",
    description="Final answer.",
    parameters={
        "type": "object",
        "additionalProperties": False,
        "required": ["answer"],
        "properties": {"answer": {"type": "string", "maxLength": 50}},
    },
)


def gen(text: str, calls: list[ParsedCall] | None = None) -> Generation:
    return Generation(request_hash="x", text=text, tool_calls=calls or [])


def test_grammar_safe_drops_only_unenforceable_keywords() -> None:
    s = grammar_safe(ROUTE.parameters)
    assert "minimum" not in s["properties"]["lat"] and "default" not in s["properties"]["mode"]
    assert s["properties"]["mode"]["enum"] == ["walk", "drive"] and s["required"] == ["lat", "lon"]
    assert ROUTE.parameters["properties"]["lat"]["minimum"] == -90  # the input is not mutated


def test_envelope_schema_is_one_call_of_an_offered_tool_and_compiles_to_a_grammar() -> None:
    schema = envelope_schema([ROUTE, FINISH])
    assert validate({"name": "route", "arguments": {"lat": 1, "lon": 2}}, schema) == []
    assert validate({"name": "finish", "arguments": {"answer": "x"}}, schema) == []
    assert validate({"name": "route", "arguments": {"answer": "x"}}, schema)  # arguments of another tool
    assert validate({"name": "teleport", "arguments": {}}, schema)
    for mode in ("json", "yaml"):
        c = constraint_for([ROUTE, FINISH], mode)
        assert c is not None and "root" in to_gbnf(c)


def test_prepare_appends_tools_to_the_system_prompt_except_in_native_mode() -> None:
    msgs = [Message(role="system", content="You plan routes."), Message(role="user", content="Go.")]
    m, tools, c = prepare(msgs, [ROUTE], "native")
    assert m == msgs and tools == [ROUTE] and c is None
    m, tools, c = prepare(msgs, [ROUTE], "prompt")
    assert tools == [] and c is None and m[0].content.startswith("You plan routes.") and "route" in m[0].content
    m, _, c = prepare(msgs[1:], [ROUTE], "yaml")
    assert m[0].role == "system" and "YAML" in m[0].content and c is not None and c.kind == "yaml_schema"
    with pytest.raises(ValueError, match="tool mode"):
        prepare(msgs, [ROUTE], "xml")


@pytest.mark.parametrize(
    "mode,text,expected",
    [
        ("prompt", '{"name": "route", "arguments": {"lat": 60.1, "lon": 24.9}}', ("route", {"lat": 60.1, "lon": 24.9})),
        (
            "prompt",
            '<tool_call>{"name": "finish", "arguments": {"answer": "A"}}</tool_call>',
            ("finish", {"answer": "A"}),
        ),
        ("native", '```json\n{"name": "finish", "arguments": {"answer": "B"}}\n```', ("finish", {"answer": "B"})),
        ("json", '{"name": "finish", "arguments": {"answer": "C"}}', ("finish", {"answer": "C"})),
        ("yaml", 'name: "finish"\narguments:\n  answer: "D"\n', ("finish", {"answer": "D"})),
    ],
)
def test_extract_calls_reads_each_mode(mode: str, text: str, expected: tuple) -> None:
    calls, status, why, _ = extract_calls(gen(text), [ROUTE, FINISH], mode)
    assert status == "ok" and why is None and [(c.name, c.arguments) for c in calls] == [expected]


def test_extract_calls_prefers_engine_parsed_calls_in_native_mode() -> None:
    calls, status, _, _ = extract_calls(
        gen("", [ParsedCall(name="route", arguments={"lat": 1, "lon": 2})]), [ROUTE], "native"
    )
    assert status == "ok" and calls[0].name == "route"


@pytest.mark.parametrize(
    "mode,text,status",
    [
        ("prompt", "I would walk along the shore.", "no_call"),
        ("json", '{"name": "route", "arguments": {"lat": "north"}}', "parse_error"),
        ("yaml", "name: [unclosed", "parse_error"),
        ("prompt", "<tool_call>{not json}</tool_call>", "parse_error"),
    ],
)
def test_extract_calls_classifies_failures(mode: str, text: str, status: str) -> None:
    _calls, got, why, _ = extract_calls(gen(text), [ROUTE, FINISH], mode)
    assert got == status and why


@pytest.mark.parametrize(
    "mode,text,calls,form",
    [
        ("prompt", 'Checking.\n```json\n{"name": "finish", "arguments": {"answer": "A"}}\n```', [], "fenced"),
        ("prompt", 'I call {"name": "finish", "arguments": {"answer": "A"}} now.', [], "prose"),
        ("prompt", '<tool_call>{"name": "finish", "arguments": {"answer": "A"}}</tool_call>', [], "tagged"),
        ("native", "", [ParsedCall(name="finish", arguments={"answer": "A"})], "native"),
        ("json", '{"name": "finish", "arguments": {"answer": "A"}}', [], "bare"),
        ("yaml", 'name: finish\narguments:\n  answer: "A"\n', [], "yaml"),
    ],
)
def test_read_calls_records_calls_status_and_form(mode: str, text: str, calls: list, form: str) -> None:
    g = gen(text, calls)
    if calls:
        g.call_form = "native"  # as the engine's finalize records a backend's calls
    found = read_calls(g, [ROUTE, FINISH], mode)
    assert found.form == form and found.why is None
    assert (g.parse_status, g.call_form, [(c.name, c.arguments) for c in g.tool_calls]) == (
        "ok",
        form,
        [("finish", {"answer": "A"})],
    )


def test_read_calls_records_no_form_without_a_call() -> None:
    g = gen("<tool_call>{not json}</tool_call>")
    assert read_calls(g, [FINISH], "prompt").form == "tagged"  # what the model tried, for the message
    assert g.parse_status == "parse_error" and g.call_form is None and g.tool_calls == []


def test_observation_roles_and_cut() -> None:
    native = observation("route", {"d": 1}, "native")
    assert native.role == "tool" and native.name == "route" and json.loads(native.content) == {"d": 1}
    text = observation("route", "x" * 50, "prompt", limit=10)
    assert text.role == "user" and text.content.startswith("Result of route: xxxxxxxxxx") and "40 more" in text.content


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "finish", "answer": "A"}',  # Qwen2.5-Coder 1.5B's final answers on MobilityBench
        '```json\n{"name": "finish", "answer": "A"}\n```',
    ],
)
def test_a_flat_call_of_an_offered_tool_is_read_with_its_form(text: str) -> None:
    g = gen(text)
    found = read_calls(g, [ROUTE, FINISH], "prompt")
    assert (found.status, found.form, [(c.name, c.arguments) for c in found.calls]) == (
        "ok",
        "flat",
        [("finish", {"answer": "A"})],
    )
    assert g.call_form == "flat"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Kiasma", "lat": 60.17, "lon": 24.94}',  # a place, not a tool: data
        '{"name": "finish"}',  # a name alone is the text reader's call without arguments, not a flat one
        'The answer is {"name": "finish", "answer": "A"} I think.',  # inside prose: not the whole reply
        '{"name": "finish", "answer": "A", "arguments": {"answer": "B"}}',  # an envelope: the text reader's to judge
        '{"name": ["finish"], "answer": "A"}',  # a name that is no string (unhashable): no call, not a crash
        '{"name": {"finish": 1}, "answer": "A"}',
    ],
)
def test_only_a_whole_reply_naming_an_offered_tool_is_a_flat_call(text: str) -> None:
    found = extract_calls(gen(text), [ROUTE, FINISH], "prompt")
    assert found.form != "flat"
