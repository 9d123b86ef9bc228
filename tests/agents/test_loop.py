"""The multi-turn tool loop: scripted engines drive every stop reason; one real-model run in each constrained mode."""

from __future__ import annotations

import asyncio
import json

import pytest

from rig.agents.loop import run_tool_loop
from rig.records import ChatRequest, Message, Sampling, ToolResult
from tests.agents.test_toolmode import FINISH, ROUTE
from tests.fakes import FakeEngine


def script(*replies: str):  # type: ignore[no-untyped-def]
    it = iter(replies)
    return lambda req: next(it)


def run(engine: FakeEngine, execute=None, **kw):  # type: ignore[no-untyped-def]
    calls: list[tuple[str, dict]] = []

    def default(name: str, args: dict) -> ToolResult:
        calls.append((name, args))
        return ToolResult(ok=True, data={"distance_m": 1200}, meta={"source": "pack"})

    kw.setdefault("mode", "prompt")
    out = asyncio.run(
        run_tool_loop(
            engine,
            [Message(role="user", content="Plan a route.")],
            [ROUTE, FINISH],
            execute or default,
            final_tool="finish",
            sampling=Sampling(),
            **kw,
        )
    )
    return out, calls


def call(name: str, **args: object) -> str:
    return json.dumps({"name": name, "arguments": args})


def test_tool_then_final_answer() -> None:
    eng = FakeEngine(script(call("route", lat=60.1, lon=24.9), call("finish", answer="1.2 km")))
    out, calls = run(eng)
    assert out.stop == "final" and out.final == {"answer": "1.2 km"} and out.steps == 2
    assert calls == [("route", {"lat": 60.1, "lon": 24.9})]
    assert [c.name for c in out.tool_calls] == ["route", "finish"] and out.tool_calls[0].meta == {"source": "pack"}
    assert out.tool_calls[0].answer == {"distance_m": 1200} and out.tool_calls[0].step == 0
    assert "1200" in eng.calls[-1]  # the observation reached the model
    assert len(out.generations) == 2 and all(g.parse_status == "ok" for g in out.generations)


def test_format_errors_are_reprompted_then_stop() -> None:
    out, _ = run(FakeEngine(lambda req: "I think you should walk."), max_format_errors=2)
    assert out.stop == "format_errors" and out.format_errors == 3 and out.final is None and out.steps == 0
    assert all(g.parse_status == "no_call" for g in out.generations)


def test_reprompt_recovers() -> None:
    out, _ = run(FakeEngine(script("hmm", call("finish", answer="ok"))))
    assert out.stop == "final" and out.format_errors == 1
    assert any("did not contain a valid tool call" in m.content for m in out.messages)


def test_step_budget() -> None:
    out, calls = run(FakeEngine(lambda req: call("route", lat=1, lon=2)), max_steps=3)
    assert out.stop == "max_steps" and out.steps == 3 and len(calls) == 3


def test_tool_errors_and_invalid_final_answers_are_observations_not_exceptions() -> None:
    def execute(name: str, args: dict) -> ToolResult:
        return ToolResult(ok=False, error="lat out of range", error_category="invalid_arguments")

    eng = FakeEngine(script(call("route", lat=99, lon=2), call("finish", wrong=1), call("finish", answer="x")))
    out, _ = run(eng, execute=execute)
    assert out.stop == "final" and out.steps == 3
    first, second, third = out.tool_calls
    assert first.verdict == "invalid" and first.error_category == "invalid_arguments"
    assert second.verdict == "invalid" and "invalid final answer" in (second.error or "")
    assert third.verdict == "valid"
    assert "lat out of range" in eng.calls[1] and "invalid final answer" in eng.calls[2]


def test_one_call_per_turn_extra_calls_are_recorded_as_skipped() -> None:
    both = json.dumps(
        [{"name": "route", "arguments": {"lat": 1, "lon": 2}}, {"name": "finish", "arguments": {"answer": "x"}}]
    )
    out, calls = run(FakeEngine(script(both, call("finish", answer="y"))))
    assert len(calls) == 1 and out.final == {"answer": "y"}
    assert [c.error_category for c in out.tool_calls] == ["skipped", None, None]


def test_async_executor_and_engine_error() -> None:
    async def execute(name: str, args: dict) -> ToolResult:
        return ToolResult(ok=True, data="fine")

    out, _ = run(FakeEngine(script(call("route", lat=1, lon=2), call("finish", answer="z"))), execute=execute)
    assert out.tool_calls[0].answer == "fine" and out.stop == "final"

    class Broken(FakeEngine):
        async def chat(self, request: ChatRequest):  # type: ignore[no-untyped-def]
            g = await super().chat(request)
            g.error = "server down"
            return g

    out, _ = run(Broken(lambda req: ""))
    assert out.stop == "engine_error" and out.error == "server down"


def test_json_mode_sends_the_envelope_constraint() -> None:
    seen: list[ChatRequest] = []

    def answer(req: ChatRequest) -> str:
        seen.append(req)
        return call("finish", answer="x")

    out, _ = run(FakeEngine(answer), mode="json")
    assert out.stop == "final" and seen[0].constraint is not None and seen[0].constraint.kind == "json_schema"
    assert seen[0].tools == [] and "finish" in seen[0].messages[0].content


@pytest.mark.model
@pytest.mark.parametrize("mode", ["json", "yaml"])
def test_real_model_constrained_calls_always_parse(gemma_engine, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Under a grammar the weak embedded model still produces a well-formed call every turn."""
    out = asyncio.run(
        run_tool_loop(
            gemma_engine,
            [Message(role="user", content="Find the walking route from 60.17,24.94, then answer.")],
            [ROUTE, FINISH],
            lambda n, a: ToolResult(ok=True, data={"distance_m": 950}),
            final_tool="finish",
            mode=mode,
            sampling=Sampling(max_tokens=96),
            max_steps=3,
        )
    )
    assert out.format_errors == 0 and out.steps >= 1
    assert all(g.parse_status == "ok" for g in out.generations)
    assert out.stop in ("final", "max_steps")


def test_native_mode_falls_back_to_prompt_when_the_engine_cannot_show_tools() -> None:
    seen: list[ChatRequest] = []

    def answer(req: ChatRequest) -> str:
        seen.append(req)
        return call("finish", answer="x")

    out, _ = run(FakeEngine(answer), mode="native")  # FakeEngine declares no native tool support
    assert out.mode_used == "prompt" and seen[0].tools == [] and "finish" in seen[0].messages[0].content


def test_calls_in_the_forms_real_models_write_are_run_and_their_form_recorded() -> None:
    """Qwen2.5-Coder wraps calls in fences and prose; each turn's form is stored with its generation."""
    replies = [
        "I'll look up the route first.\n\n```json\n" + call("route", lat=60.1, lon=24.9) + "\n```",
        "<tool_call>\n" + call("route", lat=60.2, lon=24.8),  # the closing tag never written
        "The route is 1200 m. Final: " + call("finish", answer="1.2 km") + " Done.",
    ]
    out, calls = run(FakeEngine(script(*replies)))
    assert out.stop == "final" and out.format_errors == 0 and out.final == {"answer": "1.2 km"}
    assert calls == [("route", {"lat": 60.1, "lon": 24.9}), ("route", {"lat": 60.2, "lon": 24.8})]
    assert [g.call_form for g in out.generations] == ["fenced", "tagged", "prose"]


def test_a_reply_without_a_call_records_no_form() -> None:
    out, _ = run(FakeEngine(script("I would walk.", call("finish", answer="ok"))))
    assert [(g.parse_status, g.call_form) for g in out.generations] == [("no_call", None), ("ok", "bare")]
