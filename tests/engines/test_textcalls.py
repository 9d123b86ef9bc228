"""Tool calls left in message text, in the forms real models write them (issue 35), with the form recorded.

``REAL`` holds replies rig's own runs recorded from Qwen2.5-Coder 1.5B and 0.5B (llama.cpp, temperature 0) on the
agentic benchmarks; the other cases are the shapes and the hostile inputs around them."""

from __future__ import annotations

import json
import time

import pytest

from rig.decoding.safe import MAX_CHARS
from rig.engines.textcalls import MAX_CALLS, calls_from_text, parse_arguments

ROUTE_ARGS = {
    "estimated_distance": 1.25,
    "route_type": "point-to-point",
    "waypoints": [
        {"address": "Kiasma", "description": "Start of the run"},
        {"address": "Vanha Kauppahalli", "description": "End of the run"},
    ],
}

NATIVE_FENCED = (  # the 0.5B in native mode: the template asks for <tool_call> tags, the model writes a fence
    "```json\n"
    "{\n"
    '  "name": "generate_running_route",\n'
    '  "arguments": {\n'
    '    "estimated_distance": 1.5,\n'
    '    "route_type": "loop",\n'
    '    "waypoints": [\n'
    "      {\n"
    '        "address": "Ateneum",\n'
    '        "description": "The starting point of the loop"\n'
    "      },\n"
    "      {\n"
    '        "address": "Central Helsinki",\n'
    '        "description": "The destination point of the loop"\n'
    "      }\n"
    "    ]\n"
    "  }\n"
    "}\n"
    "```"
)

NATIVE_TOOLS_TAGS = (  # the 1.5B in native mode: each call in the tag its template lists the tools in, three at once
    "<tools>\n"
    '{"name": "query_poi", "arguments": {"keywords": "Kiasma museum", "city": "Helsinki"}}\n'
    "</tools>\n"
    "<tools>\n"
    '{"name": "reverse_geocoding", "arguments": {"longitude": "24.944100", "latitude": "60.170300"}}\n'
    "</tools>\n"
    "<tools>\n"
    '{"name": "final_answer", "arguments": {"answer": "The Kiasma museum is located at Kiasma, Helsinki, Finland.", '
    '"intent": "Point-to-Point Planning", "constraints": {"place": "Kiasma museum", "city": "Helsinki"}, '
    '"route_index": -1}}\n'
    "</tools>"
)

# (benchmark, model, reply, form, [(name, arguments), ...])
REAL: list[tuple[str, str, str, str, list[tuple[str, dict]]]] = [
    (
        "mobilitybench",
        "qwen2.5-coder-1.5b",
        NATIVE_TOOLS_TAGS,
        "other_tag",
        [
            ("query_poi", {"keywords": "Kiasma museum", "city": "Helsinki"}),
            ("reverse_geocoding", {"longitude": "24.944100", "latitude": "60.170300"}),
            (
                "final_answer",
                {
                    "answer": "The Kiasma museum is located at Kiasma, Helsinki, Finland.",
                    "intent": "Point-to-Point Planning",
                    "constraints": {"place": "Kiasma museum", "city": "Helsinki"},
                    "route_index": -1,
                },
            ),
        ],
    ),
    (
        "routeeval",
        "qwen2.5-coder-0.5b",
        NATIVE_FENCED,
        "fenced",
        [
            (
                "generate_running_route",
                {
                    "estimated_distance": 1.5,
                    "route_type": "loop",
                    "waypoints": [
                        {"address": "Ateneum", "description": "The starting point of the loop"},
                        {"address": "Central Helsinki", "description": "The destination point of the loop"},
                    ],
                },
            )
        ],
    ),
    (
        "routeeval",
        "qwen2.5-coder-1.5b",
        json.dumps({"name": "generate_running_route", "arguments": ROUTE_ARGS}),
        "bare",
        [("generate_running_route", ROUTE_ARGS)],
    ),
    (
        "evgeoqa",
        "qwen2.5-coder-1.5b",
        '{"name": "Search_Nearby_POI", "arguments": {"coord": [24.942184, 60.167576]}}',
        "bare",
        [("Search_Nearby_POI", {"coord": [24.942184, 60.167576]})],
    ),
    (
        "evgeoqa",
        "qwen2.5-coder-0.5b",
        '{"name": "Search_Nearby_POI", "arguments": {"coord": [24.945892, 60.168900], "distance": 78, '
        '"direction": "N"}}',
        "bare",
        [("Search_Nearby_POI", {"coord": [24.945892, 60.1689], "distance": 78, "direction": "N"})],
    ),
]


@pytest.mark.parametrize("bench,model,text,form,calls", REAL, ids=[f"{b}-{m}-{f}" for b, m, _, f, _ in REAL])
def test_real_replies(bench: str, model: str, text: str, form: str, calls: list) -> None:
    found = calls_from_text(text)
    assert found is not None and found.status == "ok" and found.form == form
    assert [(c.name, c.arguments) for c in found.calls] == calls


CALL = '{"name": "weather_query", "arguments": {"city": "Helsinki", "need_forecast": true}}'
WEATHER = [("weather_query", {"city": "Helsinki", "need_forecast": True})]


@pytest.mark.parametrize(
    "text,form",
    [
        (f"<tool_call>\n{CALL}\n</tool_call>", "tagged"),
        (f"<tool_call>\n{CALL}", "tagged"),  # stopped at the end-of-turn token before closing the tag
        (f"<tool_call>\n```json\n{CALL}\n```\n</tool_call>", "tagged"),
        (f"<tools>\n{CALL}\n</tools>", "other_tag"),
        (f"I will look it up.\n<tool_call>{CALL}</tool_call>", "tagged"),
        (CALL, "bare"),
        (f"  [{CALL}]  ", "bare"),
        (f"```json\n{CALL}\n```", "fenced"),
        (f"```\n{CALL}\n```", "fenced"),
        (f"To answer, I call the weather tool:\n\n```json\n{CALL}\n```\n\nThis returns the forecast.", "fenced"),
        (f"```python\nprint(1)\n```\nthen\n```JSON\n{CALL}\n```", "fenced"),  # a code fence before the call's
        (f"I will call {CALL} to get the weather.", "prose"),
        (f"{CALL}\nThis checks the forecast for Helsinki.", "prose"),
        (f"{CALL}}}", "prose"),  # one closing brace too many
    ],
)
def test_forms(text: str, form: str) -> None:
    found = calls_from_text(text)
    assert found is not None and found.status == "ok" and found.form == form, found
    assert [(c.name, c.arguments) for c in found.calls] == WEATHER


@pytest.mark.parametrize(
    "obj",
    [
        {"name": "weather_query", "arguments": {"city": "Helsinki", "need_forecast": True}},
        {"name": "weather_query", "parameters": {"city": "Helsinki", "need_forecast": True}},
        {"name": "weather_query", "arguments": '{"city": "Helsinki", "need_forecast": true}'},
        {
            "type": "function",
            "function": {"name": "weather_query", "arguments": {"city": "Helsinki", "need_forecast": True}},
        },
        {
            "tool_calls": [
                {"function": {"name": "weather_query", "arguments": {"city": "Helsinki", "need_forecast": True}}}
            ]
        },
    ],
)
def test_call_shapes(obj: dict) -> None:
    found = calls_from_text(json.dumps(obj))
    assert found is not None and [(c.name, c.arguments) for c in found.calls] == WEATHER


def test_a_name_alone_is_a_call_without_arguments() -> None:
    found = calls_from_text('{"name": "list_tools"}')
    assert found is not None and [(c.name, c.arguments) for c in found.calls] == [("list_tools", {})]


def test_several_calls_in_one_reply_keep_their_order() -> None:
    two = '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    fenced = '```json\n{"name": "a", "arguments": {}}\n```\nand\n```json\n{"name": "b", "arguments": {}}\n```'
    listed = '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]'
    for text in (two, fenced, listed):
        found = calls_from_text(text)
        assert found is not None and [c.name for c in found.calls] == ["a", "b"], text


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Helsinki is sunny.",
        '[{"station_id": "s1"}, {"station_id": "s2"}]',  # a final answer, not calls
        '{"name": "Kiasma", "lat": 60.17, "lon": 24.94}',  # a place with a name, not a call
        '```json\n{"route_index": 0, "content": "Take the tram"}\n```',
        'Use the format {"name": <tool>, "arguments": {...}}.',
        '{"name": "", "arguments": {}}',
        '{"name": "f", "arguments": [1, 2]}',
        "",
    ],
)
def test_what_is_not_a_call(text: str) -> None:
    assert calls_from_text(text) is None


def test_a_tag_that_holds_no_call_is_a_parse_error_of_the_tagged_form() -> None:
    found = calls_from_text('<tool_call>{"name": "weather_query", "arguments": {"city": ')  # cut at max_tokens
    assert found is not None and found.status == "parse_error" and found.form == "tagged" and not found.calls
    found = calls_from_text(f"<tool_call>{CALL}</tool_call><tool_call>not json</tool_call>")
    assert found is not None and found.status == "parse_error" and [c.name for c in found.calls] == ["weather_query"]


def test_a_reply_that_opens_a_call_but_does_not_close_it_is_a_parse_error() -> None:
    # Recorded from the 0.5B on EVGeoQA: the previous tool error echoed into the arguments, the last brace missing.
    text = (
        '{"name": "Search_Nearby_POI", "arguments": {"coord": [24.950140, 60.177879], "distance": 78, "direction": '
        '"N", "error": "unknown argument(s) [\'direction\', \'distance\']; this tool takes coord"}'
    )
    found = calls_from_text(text)
    assert found is not None and found.status == "parse_error" and not found.calls
    assert calls_from_text('{"station_id": "s1", "rank": ') is None  # broken JSON that is no call at all


def test_one_tools_block_of_calls_a_line_each_cut_at_max_tokens() -> None:
    # The 1.5B on EVGeoQA in native mode (recorded, shortened): a <tools> block never closed, a call per line.
    text = (
        '<tools>\n{"name": "Search_Stations", "arguments": {"coord": [24.945892, 60.168900]}}\n'
        '{"name": "Search_Nearby_POI", "arguments": {"coord": [24.945892, 60.168900]}}\n'
        '{"name": "Change_Current_Location", "arguments": {"distance": "100", "direction": "N"}}\n'
        '{"name": "Search_Nearby_POI", "arguments": {"coord": [2'
    )
    found = calls_from_text(text)
    assert found is not None and found.status == "ok" and found.form == "other_tag"
    assert [c.name for c in found.calls] == ["Search_Stations", "Search_Nearby_POI", "Change_Current_Location"]


def test_a_fenced_call_cut_at_max_tokens_is_a_parse_error() -> None:
    # The 0.5B on MobilityBench in native mode (recorded, shortened): waypoints repeated until max_tokens.
    text = '```json\n{\n  "name": "walking_route",\n  "arguments": {\n    "waypoints": ["24.941000,60.170000", "24.94'
    found = calls_from_text(text)
    assert found is not None and found.status == "parse_error" and found.form == "fenced" and not found.calls


def test_calls_per_reply_are_capped() -> None:
    for text in (
        f"<tool_call>{CALL}</tool_call>" * (MAX_CALLS + 10),
        f"```json\n{CALL}\n```\n" * (MAX_CALLS + 10),
        f"call {CALL} " * (MAX_CALLS + 10),
        "[" + ",".join([CALL] * (MAX_CALLS + 10)) + "]",
    ):
        found = calls_from_text(text)
        assert found is not None and found.status == "ok" and len(found.calls) == MAX_CALLS


def test_a_reply_over_the_reader_cap_is_refused_without_a_form() -> None:
    big = '{"name": "f", "arguments": {"x": "' + "a" * MAX_CHARS + '"}}'  # a 200 KB JSON call
    found = calls_from_text(big)
    assert found is not None and found.status == "parse_error" and found.form is None and not found.calls


HOSTILE = [
    "```json\n{}\n```\n" * 10_000,  # 10,000 fenced blocks
    "```" * 30_000,
    "{" * 60_000,
    '{"' * 40_000,
    "[" * 60_000,
    "<tool_call>" * 15_000,
    "<tool_call>{" * 15_000,
    "<tools>{" * 20_000,
    "call " + "{" * 30_000 + "}" * 30_000,
    'x {"name": "f", "arguments": ' + "{" * 30_000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_replies_are_read_quickly(text: str) -> None:
    assert len(text) <= MAX_CHARS
    t0 = time.perf_counter()
    found = calls_from_text(text)
    assert time.perf_counter() - t0 < 2.0  # generous under a loaded host; a quadratic scan takes minutes
    assert found is None or found.status == "parse_error" or not found.calls


def test_reading_time_is_linear() -> None:
    def cost(n: int) -> float:
        t0 = time.perf_counter()
        calls_from_text("```json\n{}\n```\n" * (n // 12))
        calls_from_text("say {" * (n // 5))
        calls_from_text('{"' * (n // 2))
        return time.perf_counter() - t0

    cost(1_000)
    small = min(cost(15_000) for _ in range(3))
    big = min(cost(150_000) for _ in range(3))
    assert big < 30 * small + 0.05  # quadratic would be about 100 times


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments({"a": 1}) == {"a": 1}
    assert parse_arguments("[1]") is None and parse_arguments(float("nan")) is None
