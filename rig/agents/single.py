"""Single-call agent: one request, one generation. Single-turn benchmarks are one-turn episodes."""

from __future__ import annotations

from rig.decoding.constraint import Constraint
from rig.engines.base import Engine
from rig.records import ChatRequest, Episode, Generation, Sampling


def repeat_seed(seed: int, repeat: int) -> int:
    """The sampling seed of one repeat, which the runner records on its result (pass^k needs distinct trials)."""
    return seed + repeat


def repeat_sampling(base: Sampling, repeat: int, cap: int | None = None) -> Sampling:
    """Each repeat gets its own seed so repeated runs can differ when temperature > 0. ``cap``: a benchmark's bound
    on this call's reply; the model's own max_tokens applies when it is lower."""
    upd: dict = {"seed": repeat_seed(base.seed, repeat)}
    if cap is not None:
        upd["max_tokens"] = min(base.max_tokens, cap)
    return base.model_copy(update=upd)


async def single_call(
    engine: Engine, episode: Episode, sampling: Sampling, constraint: Constraint | None = None
) -> Generation:
    req = ChatRequest(messages=episode.messages, tools=episode.tools, constraint=constraint, sampling=sampling)
    return await engine.chat(req)
