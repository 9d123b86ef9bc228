"""Replaying a reference run's episodes through its benchmark, each engine call answered with the stored reply, to
recover every (prompt, reply) pair."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rig.analyses.divergence.records import DivergenceError
from rig.analyses.divergence.tokenclass import output_names
from rig.records import (
    ChatRequest,
    EpisodeResult,
    Generation,
)


class Pair(BaseModel):
    """One engine call of the reference run: the request as replayed and the stored reply."""

    episode_id: str
    repeat: int
    idx: int
    request: ChatRequest
    reply: Generation
    tools: list[str]


def _replay_engine(inner: Any) -> Any:
    """An engine answering each call with the next stored reply, recording the requests; rendering, capabilities
    and tool-call parsing are the reference engine's, so the benchmark builds exactly the requests it built."""
    from rig.engines.base import Engine, Reply

    class Replay(Engine):
        name = "replay"

        def __init__(self) -> None:
            self.spec, self.weights, self.gpu, self.args = inner.spec, inner.weights, None, inner.args
            self.counters = {"tool_calls_from_text": 0}
            self.meter = None  # a replay draws no energy worth measuring (Engine.__init__ would re-validate args)
            self.queue: list[Generation] = []
            self.requests: list[ChatRequest] = []

        @property
        def capabilities(self) -> Any:
            return inner.capabilities

        async def load(self) -> None:
            return None

        async def generate(self, request: ChatRequest) -> Reply:
            self.requests.append(request)
            stored = self.queue.pop(0) if self.queue else None
            gen = Generation(request_hash=request.digest())
            if stored is None:
                gen.error = "replay: the reference run stored no reply for this call"
            else:
                gen.text, gen.finish_reason, gen.error = stored.text, stored.finish_reason, stored.error
                gen.prompt_tokens, gen.completion_tokens = stored.prompt_tokens, stored.completion_tokens
            return Reply(gen)

        def parse_native_calls(self, text: str, request: ChatRequest) -> Any:
            return inner.parse_native_calls(text, request)

        def count_tokens(self, text: str) -> int | None:
            return inner.count_tokens(text)

    return Replay()


def replay_pairs(run_dir: Path, inner: Any) -> tuple[list[Pair], dict[str, str], list[str], list[EpisodeResult]]:
    """Every (request, reply) of the reference run's scored episodes; skipped episodes with the reason; keys of
    calls whose replayed request differs from the stored hash; the results themselves."""
    from rig.benchmarks import get_benchmark_class
    from rig.benchmarks.base import RunContext
    from rig.runfolder.folder import RunFolder

    folder = RunFolder(run_dir)
    man, info = folder.manifest, folder.benchmarks[0]
    results = folder.results(info.name)
    try:
        bench = get_benchmark_class(info.name)(Path(info.data_path), info.options)
        if bench.data_hash() != info.data_hash:
            raise DivergenceError(
                f"reference run {run_dir}: manifest.json config.benchmarks[0].data_hash: the {info.name} data at "
                f"{info.data_path} changed since the run, so its prompts cannot be rebuilt"
            )
        episodes = {e.id: e for e in bench.episodes()}
    except DivergenceError:
        raise
    except Exception as e:
        raise DivergenceError(
            f"reference run {run_dir}: manifest.json config.benchmarks[0].data_path: cannot rebuild the "
            f"{info.name} episodes ({type(e).__name__}: {e})"
        ) from None
    cfg = man.config
    # validated: the manifest records the modes as plain strings
    ctx = RunContext.model_validate({"sampling": cfg.model.sampling, "decode": cfg.decode, "tool_mode": cfg.tool_mode})
    engine = _replay_engine(inner)
    pairs: list[Pair] = []
    skipped: dict[str, str] = {}
    mismatches: list[str] = []

    async def go() -> None:
        await bench.setup()
        try:
            for res in results:
                key = f"{res.episode_id}#{res.repeat}"
                if res.status != "scored":
                    skipped[key] = f"status {res.status} ({res.error_category or 'no category'})"
                    continue
                ep = episodes.get(res.episode_id)
                if ep is None:
                    skipped[key] = "episode no longer in the benchmark data"
                    continue
                engine.queue, engine.requests = list(res.generations), []
                await bench.run_episode(ep, engine, ctx, res.repeat)
                names = {t.name for t in ep.tools} | {c.name for c in res.tool_calls} | output_names(res.output)
                for i, (req, gen) in enumerate(zip(engine.requests, res.generations, strict=False)):
                    if req.digest() != gen.request_hash:
                        mismatches.append(f"{key}/{i}")
                    if gen.error or not gen.text:
                        continue
                    tools = names | {t.name for t in req.tools} | {c.name for c in gen.tool_calls}
                    pairs.append(
                        Pair(
                            episode_id=res.episode_id,
                            repeat=res.repeat,
                            idx=i,
                            request=req,
                            reply=gen,
                            tools=sorted(tools),
                        )
                    )
        finally:
            await bench.teardown()

    asyncio.run(go())
    return pairs, skipped, mismatches, results


# -- scoring -----------------------------------------------------------------------------------------------------
