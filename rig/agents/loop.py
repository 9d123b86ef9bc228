"""The multi-turn tool loop every agentic benchmark builds on: ask, read one call, run it, show the result, repeat.

A benchmark supplies the tools, an executor and the name of the tool that ends the episode (its arguments are the
final answer, so the answer goes through the same tool mode and constraint as every other call), or no final tool
for a worker that only runs ``max_steps`` calls (Plan-and-Execute's task workers). The loop never
raises on model behaviour: a reply without a call is re-prompted up to ``max_format_errors`` times, a bad call gets
the executor's error as its observation, and the outcome says why the loop stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig.agents.toolmode import assistant_turn, effective_mode, observation, prepare, read_calls
from rig.decoding.validate import validate
from rig.engines.base import Engine
from rig.records import ChatRequest, Generation, Message, ParsedCall, Sampling, ToolCall, ToolResult, ToolSpec

StopReason = Literal["final", "max_steps", "format_errors", "engine_error"]


Executor = Callable[[str, dict[str, Any]], ToolResult | Awaitable[ToolResult]]
# Only the map service's answer sources are kept on the recorded call (what stored results have always carried).
_SOURCES = ("hit", "fuzzy", "miss", "pack")


class LoopOutcome(BaseModel):
    generations: list[Generation] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    final: dict[str, Any] | None = None  # arguments of the final tool, validated against its schema
    stop: StopReason = "max_steps"
    steps: int = 0
    format_errors: int = 0
    mode_used: str = ""  # the tool mode actually served (native falls back to prompt without template support)
    messages: list[Message] = Field(default_factory=list)  # the whole conversation, for traces
    error: str | None = None


REPROMPT = (
    "Your reply did not contain a valid tool call ({why}). Reply with exactly one tool call, "
    "using one of the tools listed."
)


async def run_tool_loop(
    engine: Engine,
    messages: list[Message],
    tools: list[ToolSpec],
    execute: Executor,
    *,
    final_tool: str | None,
    mode: str,
    sampling: Sampling,
    max_steps: int = 10,
    max_format_errors: int = 2,
    observation_chars: int = 4000,
) -> LoopOutcome:
    """Run until the model calls ``final_tool`` with valid arguments, or a budget runs out.

    ``max_steps`` counts model calls that produced a tool call; format errors have their own budget. Only the
    first call of a reply is executed (one tool per turn); extra calls are recorded as skipped."""
    by_name = {t.name: t for t in tools}
    if final_tool is not None and final_tool not in by_name:
        raise ValueError(f"final tool {final_tool!r} is not among the offered tools")
    mode = effective_mode(mode, engine)
    out = LoopOutcome(mode_used=mode)
    history = list(messages)
    while out.steps < max_steps:
        msgs, req_tools, constraint = prepare(history, tools, mode)
        gen = await engine.chat(
            ChatRequest(
                messages=msgs,
                tools=req_tools,
                tool_mode=mode,  # type: ignore[arg-type]
                constraint=constraint,
                sampling=sampling,
            )
        )
        out.generations.append(gen)
        if gen.error:
            out.stop, out.error = "engine_error", gen.error
            break
        calls, _, why, _ = read_calls(gen, tools, mode)
        if not calls:
            out.format_errors += 1
            history.append(assistant_turn(gen, calls))
            if out.format_errors > max_format_errors:
                out.stop = "format_errors"
                break
            history.append(Message(role="user", content=REPROMPT.format(why=why)))
            continue
        step = out.steps
        out.steps += 1
        call, extra = calls[0], calls[1:]
        history.append(assistant_turn(gen, calls))
        out.tool_calls.extend(_skipped(c, step) for c in extra)
        if call.name == final_tool:
            record, payload = _final_answer(call, by_name[final_tool], step)
            out.tool_calls.append(record)
            if payload is None:
                out.final, out.stop = call.arguments, "final"
                break
        else:
            record, payload = await _execute(call, execute, step)
            out.tool_calls.append(record)
        history.append(observation(call.name, payload, mode, observation_chars))
    out.messages = history
    return out


def _skipped(call: ParsedCall, step: int) -> ToolCall:
    """A call past the first of a reply: recorded, never run."""
    return ToolCall(
        name=call.name,
        arguments=call.arguments,
        verdict="invalid",
        step=step,
        error="skipped: one tool call per turn",
        error_category="skipped",
    )


def _final_answer(call: ParsedCall, final: ToolSpec, step: int) -> tuple[ToolCall, Any]:
    """The final tool's call as recorded, and the observation to show (None: its arguments are valid, the end)."""
    errors = validate(call.arguments, final.parameters)
    if not errors:
        return ToolCall(name=call.name, arguments=call.arguments, step=step), None
    payload: Any = {"error": "invalid final answer: " + "; ".join(errors[:5])}
    record = ToolCall(
        name=call.name,
        arguments=call.arguments,
        verdict="invalid",
        step=step,
        error=payload["error"],
        error_category="invalid_arguments",
    )
    return record, payload


async def _execute(call: ParsedCall, execute: Executor, step: int) -> tuple[ToolCall, Any]:
    """Run the call through the executor: the call as recorded and the observation to show."""
    answered = execute(call.name, call.arguments)
    res = await answered if isinstance(answered, Awaitable) else answered
    record = ToolCall(
        name=call.name,
        arguments=call.arguments,
        verdict="valid" if res.ok else "invalid",
        answer=res.data if res.ok else None,
        error=res.error,
        error_category=res.error_category,
        step=step,
        meta={"source": res.source} if res.source in _SOURCES else {},
    )
    return record, res.data if res.ok else {"error": res.error}
