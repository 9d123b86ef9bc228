"""MobilityBench's scoring records: what an agent produced (``Prediction``), what is true (``Truth``), and the names,
modes and similarity thresholds both metric modes share."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from rig.benchmarks.mobilitybench.tools import GT_ALIASES

METRICS: tuple[str, ...] = ("ID", "IE", "DEC_P", "DEC_R", "TS_P", "TS_R", "SC", "DR", "FPR", "IT", "OT")
MODES = ("paper", "reference")
ID_THRESHOLD = 0.7  # similarity_threshold of the reference configuration (inclusive)
ANSWER_THRESHOLD = 0.8  # answer similarity threshold (strict)


class Call(BaseModel):
    """One tool call as the metrics see it."""

    name: str
    arguments: Any = Field(default_factory=dict)  # dict, or JSON text as some models write it
    ok: bool | None = None  # the sandbox answered successfully
    valid: bool | None = None  # passed schema validation (None: not recorded; the metric validates itself)
    task: int = 0  # Plan-and-Execute: index of the plan step whose worker made it (cumulative capture)
    worker: int | None = None  # Plan-and-Execute: index into Prediction.workers of the worker that made it


class Prediction(BaseModel):
    """What an agent produced for one episode, in the shape both modes read."""

    intent: str | None = None  # None: no intent output at all (planner failed / no final answer)
    constraints: dict[str, Any] | None = None
    thinking: str = ""
    steps: list[str] | None = None  # plan tasks (P&E) or step thoughts (ReAct); None: no plan text
    step_actions: list[set[str]] | None = None  # per step, atomic actions known from the tool it called (ReAct)
    calls: list[Call] = Field(default_factory=list)
    workers: list[int] | None = None  # Plan-and-Execute: the plan step of each worker run, in order (callers or not)
    content: str | None = None  # the final answer text; None: no final answer
    route_index: int | None = None
    report: str | None = None  # the reporter text the reference evaluator reads (```json fence)
    delivered: bool = False  # the agent ended through its final answer, within budget
    errored: bool = False  # the run raised (engine error): reference mode drops it everywhere but efficiency
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: dict[str, Any] | None = None  # reference stage usage keys, when scoring upstream raw results


class ConstraintItem(BaseModel):
    slot: str
    values: list[str]  # accepted spellings of one value


class Checks(BaseModel):
    """What a correct final answer must satisfy (paper-mode FPR). Every present group must pass."""

    route: dict[str, Any] | None = None  # {tool, origin, destination, waypoints?, strategy?}: a matching call
    route_index: int | None = None  # the plan the answer must choose (route-constrained)
    distance_m: float | None = None  # the answer must state this distance (5 %) ...
    duration_s: float | None = None  # ... or this duration (5 %, at least 1 minute); either one passes
    clock: str | None = None  # "HH:MM" the answer must state (within 3 minutes)
    facts: list[list[str]] = Field(default_factory=list)  # every group: one of its spellings in the answer
    places: list[str] = Field(default_factory=list)  # at least one named in the answer ...
    coord: dict[str, float] | None = None  # ... or a coordinate within max_m of {lat, lon}
    similar: str | None = None  # the answer contains it or is similar (> 0.8) to it
    traffic: str | None = None  # clear | slow | congested: the road status the answer must state (Traffic Info)


class Truth(BaseModel):
    scenario: str
    family: str = ""
    tool_list: list[dict[str, Any]] = Field(default_factory=list)
    slots: dict[str, Any] = Field(default_factory=dict)  # reference GT columns (IE slots, answer rules)
    constraints: list[ConstraintItem] | None = None  # paper IE
    checks: Checks | None = None  # paper FPR
    lang: str = "en"


def gt_calls(truth: Truth) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for c in truth.tool_list:
        name = GT_ALIASES.get(str(c.get("name", "")), str(c.get("name", "")))
        args = c.get("arguments") or {}
        out.append((name, args if isinstance(args, dict) else {}))
    return out


def call_args(a: Any) -> dict[str, Any]:
    if isinstance(a, dict):
        return a
    if isinstance(a, str):
        try:
            v = json.loads(a)
            return v if isinstance(v, dict) else {}
        except (ValueError, RecursionError):  # bad JSON, an integer over Python's digit limit, deep nesting
            return {}
    return {}
