"""Every grammar a benchmark sends loads in llama.cpp's own parser and in llguidance.

Constraints are captured from one real episode of each benchmark per constrained mode (a recording engine that
answers with nothing usable), so a new tool or a bigger bound is covered without listing schemas here. llama.cpp
refuses a grammar whose repetitions expand too far (``X{0,200}`` of a nested group); llama-cpp-python does not
notice until generation, where it crashes (seen in its server).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rig.benchmarks import BENCHMARKS, get_benchmark_class
from rig.benchmarks.base import RunContext
from rig.decoding import Constraint, to_gbnf, to_lark
from rig.records import ChatRequest, Generation, Sampling, Timings
from tests.fakes import FakeEngine

OPTIONS = {"mobilitybench": {"similarity": "jaccard"}, "urbangeo": {"judge_decode": "verdict"}}


class Recording(FakeEngine):
    def __init__(self) -> None:
        super().__init__(lambda _r: "no")
        self.constraints: list[Constraint] = []

    async def chat(self, request: ChatRequest) -> Generation:
        if request.constraint is not None:
            self.constraints.append(request.constraint)
        return Generation(
            request_hash=request.digest(),
            text="no",
            prompt_tokens=1,
            completion_tokens=1,
            timings=Timings(e2e_s=0.0),
            finish_reason="stop",
        )


def _constraints(name: str, mode: str) -> list[Constraint]:
    opts = {**OPTIONS.get(name, {}), **({"format": mode} if name == "callnavi" else {})}
    bench = get_benchmark_class(name)(None, opts)
    eng = Recording()
    ctx = RunContext(sampling=Sampling(max_tokens=32), decode=mode, tool_mode=mode)
    by_group: dict[str, object] = {}
    for ep in bench.episodes():  # one episode per prompt group and task keeps this quick
        by_group.setdefault(ep.prefix_group + "|" + ep.id.split("/")[-1], ep)
    for ep in list(by_group.values())[:12]:
        asyncio.run(bench.run_episode(ep, eng, ctx, 0))
    return eng.constraints


@pytest.mark.parametrize("mode", ["json", "yaml"])
@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_every_benchmark_grammar_loads(
    name: str,
    mode: str,
    llama_matcher,
    guidance,  # type: ignore[no-untyped-def]
    helsinki_pack: Path,
) -> None:
    constraints = _constraints(name, mode)
    assert constraints, f"{name} sent no constraint in {mode} mode"
    for c in {to_gbnf(c): c for c in constraints}.values():
        gbnf = to_gbnf(c)
        assert llama_matcher.loads(gbnf), f"llama.cpp cannot parse {name}'s {mode} grammar:\n{gbnf[:600]}"
        guidance.compile("lark", to_lark(c))
