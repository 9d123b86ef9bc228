"""The two agent frameworks of the paper, over the rig's tool modes.

ReAct (think-act-observe): one loop (rig.agents.loop.run_tool_loop) over the nine sandbox tools plus
``final_answer``, whose arguments carry the answer, the intent label and the extracted constraints (so ID and IE can
be scored), and the chosen route index. A step's thought is the text the model writes beside its call (prompt and
native modes; the constrained modes admit only the call).

Plan-and-Execute (planner, worker, reporter), as the reference builds it: the planner makes one ``make_plan`` call
(thinking, intent, constraints, steps as a list of sequential steps of parallel tasks); each task is one worker call
that must call a tool (the plan is never revised; a step whose tasks all fail ends execution); the reporter sees the
whole history and calls ``final_answer``. Workers see all earlier results, as the reference's shared state does.

Both stop at ``max_steps`` model calls that produced a call (P&E: planner + workers + reporter together).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from pydantic import BaseModel, Field

from rig.agents.loop import LoopOutcome, run_tool_loop
from rig.benchmarks.mobilitybench.lexicon import SCENARIOS
from rig.benchmarks.mobilitybench.scoring.paper import tool_actions
from rig.benchmarks.mobilitybench.scoring.records import Call, Prediction
from rig.benchmarks.mobilitybench.tools import STRATEGIES_EN, agent_tools
from rig.engines.base import Engine
from rig.records import Generation, Message, Sampling, ToolCall, ToolResult, ToolSpec

FINAL = "final_answer"
PLAN = "make_plan"
_STR = {"type": "string", "maxLength": 120}
CONSTRAINTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "every constraint the user stated: places, travel mode, preferences, time, ...; omit what "
    "the user did not say",
    "properties": {
        "origin": _STR,
        "destination": _STR,
        "place": _STR,
        "near": _STR,
        "category": _STR,
        "road": _STR,
        "city": _STR,
        "time": _STR,
        "mode": {"type": "string", "enum": ["walk", "bike", "drive", "transit"]},
        "waypoints": {"type": "array", "items": _STR, "maxItems": 5},
        "preferences": {"type": "array", "items": {"type": "string", "enum": list(STRATEGIES_EN)}, "maxItems": 2},
        "avoid": {"type": "array", "items": _STR, "maxItems": 4},
    },
    "additionalProperties": False,
}
INTENT = {"type": "string", "maxLength": 60, "description": "one task scenario: " + "; ".join(SCENARIOS)}
FINAL_TOOL = ToolSpec(
    name=FINAL,
    description="Give the final answer to the user and end the task.",
    parameters={
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "maxLength": 1200,
                "description": "the answer for the user, with the key "
                "facts (distances, durations, times, addresses, names) taken from the tool results",
            },
            "intent": INTENT,
            "constraints": CONSTRAINTS_SCHEMA,
            "route_index": {
                "type": "integer",
                "description": "0-based index of the recommended route or transit plan; "
                "-1 if the trip is impossible; omit for information questions",
            },
        },
        "required": ["answer", "intent", "constraints"],
        "additionalProperties": False,
    },
)
REPORT_TOOL = ToolSpec(
    name=FINAL,
    description="Give the final answer to the user.",
    parameters={
        "type": "object",
        "properties": {k: FINAL_TOOL.parameters["properties"][k] for k in ("answer", "route_index")},
        "required": ["answer"],
        "additionalProperties": False,
    },
)
PLAN_TOOL = ToolSpec(
    name=PLAN,
    description="Write the plan.",
    parameters={
        "type": "object",
        "properties": {
            "thinking": {"type": "string", "maxLength": 600, "description": "what the user wants and how to get it"},
            "intent": INTENT,
            "constraints": CONSTRAINTS_SCHEMA,
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": 6,
                "description": "sequential steps; each step is a "
                "list of tasks that can run in parallel, each task one tool call described in words",
                "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "string", "maxLength": 200}},
            },
        },
        "required": ["thinking", "intent", "constraints", "steps"],
        "additionalProperties": False,
    },
)


class AgentRun(BaseModel):
    """What an agent run leaves: the prediction for the metrics, plus records for the store."""

    prediction: Prediction
    generations: list[Generation] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop: str = "max_steps"
    error: str | None = None
    final: dict[str, Any] | None = None
    workers: list[int] = Field(default_factory=list)  # P&E: the plan step of each worker run, in order
    call_worker: dict[int, int] = Field(default_factory=dict)  # P&E: index in tool_calls -> worker


def context_block(case_context: dict[str, Any]) -> str:
    ctx = {k: v for k, v in case_context.items() if k != "current_time"}
    return (
        f"Current time: {case_context.get('current_time', '')} (fixed for this task).\n"
        f"Context: {json.dumps(ctx, ensure_ascii=False)}\n"
        'Coordinates are "lon,lat" strings (longitude first). The user\'s current location is '
        "user_current_location."
    )


LABELS = "\n".join(f"- {s} ({f})" for s, f in SCENARIOS.items())

REACT_SYSTEM = """You are a route-planning assistant with map tools. Work in think-act-observe steps: write one short \
thought, then call exactly one tool; you will see its result. Use only facts from tool results. Resolve place names \
with query_poi before routing. When you have what you need, call final_answer with:
- answer: the reply for the user, with the numbers and names from the tools;
- intent: the task scenario, one of
{labels}
- constraints: what the user asked for (origin, destination, waypoints, mode, preferences, avoid, time, city, road, \
category, near, place), only what the user said;
- route_index: the chosen route or transit plan (0-based), -1 if impossible; omit for information questions.
{context}"""

PLANNER_SYSTEM = """You are the planner of a route-planning assistant. Read the user's request and call make_plan \
with your thinking, the intent (one of the task scenarios below), the user's constraints, and the steps: a list of \
sequential steps, each a list of tasks that can run in parallel; each task is one map-tool call described in words \
(tools: query_poi, driving_route, walking_route, bicycling_route, bus_route, weather_query, search_around_poi, \
reverse_geocoding, traffic_status).
Task scenarios:
{labels}
{context}"""

WORKER_SYSTEM = """You are a worker of a route-planning assistant. Do the task you are given by calling exactly one \
map tool with the right arguments, using the results already obtained above.
{context}"""

REPORTER_SYSTEM = """You are the reporter of a route-planning assistant. From the tool results above, call \
final_answer with the reply for the user (numbers and names from the tools) and, for route requests, the 0-based \
route_index of the recommended route or transit plan (-1 if impossible).
{context}"""


def _thought(text: str) -> str:
    """The text a model wrote beside its call: everything before the call's JSON or tag."""
    cut = len(text)
    for mark in ("<tool_call>", "```", "{"):
        i = text.find(mark)
        if i != -1:
            cut = min(cut, i)
    return re.sub(r"\s+", " ", text[:cut]).strip()[:400]


def _sum(vals: list[int | None]) -> int | None:
    present = [v for v in vals if v is not None]
    return sum(present) if present else None


def _calls_of(
    tool_calls: list[ToolCall], task_of: dict[int, int] | None = None, worker_of: dict[int, int] | None = None
) -> list[Call]:
    out = []
    for i, tc in enumerate(tool_calls):
        if tc.name == FINAL or tc.error_category == "skipped":
            continue
        out.append(
            Call(
                name=tc.name,
                arguments=tc.arguments,
                ok=tc.verdict == "valid",
                valid=tc.error_category not in ("invalid_arguments", "unknown_tool"),
                task=(task_of or {}).get(i, tc.step or 0),
                worker=(worker_of or {}).get(i),
            )
        )
    return out


def report_text(final: dict[str, Any] | None) -> str | None:
    """The reporter text the reference evaluator reads: a ```json fence with route_index / content / route_info."""
    if not final:
        return None
    idx = final.get("route_index")
    body = {"route_index": "" if idx is None else str(idx), "content": str(final.get("answer", "")), "route_info": ""}
    return "```json\n" + json.dumps(body, ensure_ascii=False) + "\n```"


def _finish(pred: Prediction, final: dict[str, Any] | None) -> None:
    if final is not None:
        pred.content = str(final.get("answer") or "")
        idx = final.get("route_index")
        pred.route_index = idx if isinstance(idx, int) and not isinstance(idx, bool) else None
        pred.report = report_text(final)


async def run_react(
    engine: Engine, case: Any, service: Any, *, mode: str, sampling: Sampling, max_steps: int = 10
) -> AgentRun:
    tools = [*agent_tools(case.truth.lang), FINAL_TOOL]
    system = REACT_SYSTEM.format(labels=LABELS, context=context_block(case.context))
    msgs = [Message(role="system", content=system), Message(role="user", content=case.query)]
    out: LoopOutcome = await run_tool_loop(
        engine, msgs, tools, service.call, final_tool=FINAL, mode=mode, sampling=sampling, max_steps=max_steps
    )
    # Thoughts: the generation that made each step's call.
    step_gens = [g for g in out.generations if g.tool_calls]
    # Under json / yaml the reply is the call and nothing else (a YAML call has no "{" to cut a thought at).
    thoughts = [_thought(g.text) if out.mode_used not in ("json", "yaml") else "" for g in step_gens]
    steps, actions = [], []
    for tc in out.tool_calls:
        if tc.name == FINAL or tc.error_category == "skipped":
            continue
        # A step is its thought; the tool it called is its action (paper mode), never words of the step: the
        # reference's keyword rules would read a tool name such as walking_route as a step of its own.
        steps.append(thoughts[tc.step] if tc.step is not None and tc.step < len(thoughts) else "")
        actions.append(tool_actions(tc.name, tc.arguments))
    final = out.final
    pred = Prediction(
        intent=str(final.get("intent", "")) if final else None,
        constraints=final.get("constraints") if final else None,
        thinking=" ".join(t for t in thoughts if t)
        + (" " + json.dumps(final.get("constraints"), ensure_ascii=False) if final else ""),
        steps=steps if any(steps) else None,  # no thought written (the constrained modes admit none): no plan text
        step_actions=actions,
        calls=_calls_of(out.tool_calls),
        delivered=out.stop == "final",
        errored=out.stop == "engine_error",
        prompt_tokens=_sum([g.prompt_tokens for g in out.generations]),
        completion_tokens=_sum([g.completion_tokens for g in out.generations]),
    )
    _finish(pred, final)
    return AgentRun(
        prediction=pred,
        generations=out.generations,
        tool_calls=out.tool_calls,
        stop=out.stop,
        error=out.error,
        final=final,
    )


async def run_plan_execute(
    engine: Engine, case: Any, service: Any, *, mode: str, sampling: Sampling, max_steps: int = 10
) -> AgentRun:
    ctx = context_block(case.context)
    run = AgentRun(prediction=Prediction())
    gens, tcs = run.generations, run.tool_calls
    # Planner
    planner_system = PLANNER_SYSTEM.format(labels=LABELS, context=ctx)
    plan_out = await run_tool_loop(
        engine,
        [Message(role="system", content=planner_system), Message(role="user", content=case.query)],
        [PLAN_TOOL],
        lambda n, a: ToolResult(ok=False),
        final_tool=PLAN,
        mode=mode,
        sampling=sampling,
        max_steps=1,
    )
    gens += plan_out.generations
    if plan_out.stop == "engine_error":
        return _pe_done(run, "engine_error", plan_out.error, None, None)
    plan = plan_out.final
    budget = max_steps - 2  # planner and reporter take one call each
    tools = agent_tools(case.truth.lang)
    history = [
        Message(role="system", content=WORKER_SYSTEM.format(context=ctx)),
        Message(role="user", content=case.query),
    ]
    tasks_flat: list[str] = []
    if plan:
        history.append(Message(role="assistant", content="Plan: " + json.dumps(plan["steps"], ensure_ascii=False)))
        for si, step in enumerate(plan["steps"]):
            tasks = [t for t in step if t.strip()]
            if not tasks:
                continue
            tasks = tasks[: max(0, budget)]
            if not tasks:
                break
            budget -= len(tasks)
            tasks_flat += tasks
            outs = await _workers(engine, history, tasks, tools, service, mode, sampling)
            merged, failed, errored = _merge_workers(run, outs, len(history), si)
            if errored is not None:
                return _pe_done(run, "engine_error", errored.error, plan, tasks_flat)
            history += merged
            if failed == len(tasks):
                break  # every task of the step failed: on to the reporter
    rep = await _report(engine, ctx, history, mode, sampling)
    gens += rep.generations
    final = rep.final
    if rep.stop == "engine_error":
        return _pe_done(run, "engine_error", rep.error, plan, tasks_flat)
    run.final = final
    tcs += [tc.model_copy(update={"step": (tc.step or 0) + 1000}) for tc in rep.tool_calls]
    _pe_done(run, "final" if rep.stop == "final" else ("no_plan" if not plan else rep.stop), None, plan, tasks_flat)
    _finish(run.prediction, final)
    return run


async def _workers(
    engine: Engine,
    history: list[Message],
    tasks: list[str],
    tools: list[ToolSpec],
    service: Any,
    mode: str,
    sampling: Sampling,
) -> list[LoopOutcome]:
    """One plan step's tasks. Parallel tasks see the same history; each is one turn of the shared loop (one call, no
    final tool), and their messages are merged afterwards in task order."""
    return await asyncio.gather(
        *(
            run_tool_loop(
                engine,
                [*history, Message(role="user", content=f"Task: {t}")],
                tools,
                service.call,
                final_tool=None,
                mode=mode,
                sampling=sampling,
                max_steps=1,
                max_format_errors=0,
            )
            for t in tasks
        )
    )


def _merge_workers(
    run: AgentRun, outs: list[LoopOutcome], seen: int, si: int
) -> tuple[list[Message], int, LoopOutcome | None]:
    """Record plan step ``si``'s workers in ``run``, in task order: the messages past the ``seen`` history (the task,
    the reply and, when a call ran, its observation), how many tasks failed, and the first worker that ended on an
    engine error (the workers after it are not recorded)."""
    merged: list[Message] = []
    failed = 0
    for out in outs:
        run.generations.extend(out.generations)
        merged += out.messages[seen:]
        if out.stop == "engine_error":
            return merged, failed, out
        # One worker per task, callers or not: the reference's capture records each (see cumulative_capture).
        run.call_worker.update({len(run.tool_calls) + k: len(run.workers) for k in range(len(out.tool_calls))})
        run.workers.append(si)
        run.tool_calls.extend(tc.model_copy(update={"step": si}) for tc in out.tool_calls)
        ran = [tc for tc in out.tool_calls if tc.error_category != "skipped"]
        failed += 0 if ran and ran[0].verdict == "valid" else 1
    return merged, failed, None


async def _report(engine: Engine, ctx: str, history: list[Message], mode: str, sampling: Sampling) -> LoopOutcome:
    """The reporter: the workers' conversation under its own system prompt, one call of the final tool."""
    rep_msgs = [
        Message(role="system", content=REPORTER_SYSTEM.format(context=ctx)),
        *history[1:],
        Message(role="user", content="Now give the final answer."),
    ]
    return await run_tool_loop(
        engine,
        rep_msgs,
        [REPORT_TOOL],
        lambda n, a: ToolResult(ok=False),
        final_tool=FINAL,
        mode=mode,
        sampling=sampling,
        max_steps=1,
    )


def _pe_done(
    run: AgentRun, stop: str, error: str | None, plan: dict[str, Any] | None, tasks: list[str] | None
) -> AgentRun:
    p = run.prediction
    run.stop, run.error = stop, error
    if plan:
        p.intent, p.constraints = str(plan.get("intent", "")), plan.get("constraints")
        p.thinking = str(plan.get("thinking", ""))
        p.steps = list(tasks or [])
    p.calls = _calls_of(run.tool_calls, worker_of=run.call_worker)
    p.workers = list(run.workers)
    p.delivered = stop == "final"
    p.errored = stop == "engine_error"
    p.prompt_tokens = _sum([g.prompt_tokens for g in run.generations])
    p.completion_tokens = _sum([g.completion_tokens for g in run.generations])
    return run
