"""Schedules episodes x repeats onto an engine, up to N in flight, and stores each as it finishes."""

from __future__ import annotations

import asyncio
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from rig.agents.single import repeat_seed
from rig.benchmarks.base import Benchmark, RunContext
from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult
from rig.runfolder.store import DuplicateResult, Store
from rig.runformat import storage_error
from rig.telemetry.energy import EnergyMeter


@dataclass
class WorkItem:
    benchmark: Benchmark
    episode: Episode
    repeat: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.benchmark.name, self.episode.id, self.repeat)


@dataclass
class RunStats:
    planned: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    wall_s: float = 0.0


def plan(
    benchmarks: list[tuple[Benchmark, list[Episode]]],
    repeats: int,
    *,
    order: str = "grouped",
    seed: int = 0,
) -> list[WorkItem]:
    """Order work so that episodes sharing a prompt prefix run back to back.

    Engines that cache the previous prompt (llama.cpp) then re-evaluate only the differing tail.
    Repeats of one episode are adjacent for the same reason. ``order="shuffled"`` exists to measure that.
    """
    items = [WorkItem(b, e, r) for b, eps in benchmarks for e in eps for r in range(repeats)]
    if order == "shuffled":
        random.Random(seed).shuffle(items)
    elif order == "grouped":
        first_seen: dict[str, int] = {}
        for i, it in enumerate(items):
            first_seen.setdefault(it.episode.prefix_group, i)
        items.sort(key=lambda it: (it.benchmark.name, first_seen[it.episode.prefix_group]))
    elif order != "given":
        raise ValueError(f"unknown order {order!r}")
    return items


async def run_items(
    items: list[WorkItem],
    engine: Engine,
    store: Store,
    ctx: RunContext,
    *,
    concurrency: int = 1,
    on_done: Callable[[EpisodeResult], None] | None = None,
    meter: EnergyMeter | None = None,
) -> RunStats:
    """Run what the store does not hold yet. Each benchmark's ``setup`` is awaited before any episode and its
    ``teardown`` after the last, also when an episode or the run fails (only benchmarks whose setup ran).
    With a ``meter``, each result carries its generations' energy and their sum before it is stored."""
    stats = RunStats(planned=len(items))
    done = store.done_keys()
    todo = [it for it in items if it.key not in done]
    stats.skipped = len(items) - len(todo)
    limit = max(1, min(concurrency, engine.capabilities.max_concurrency))
    queue: asyncio.Queue[WorkItem] = asyncio.Queue()
    for it in todo:
        queue.put_nowait(it)
    t0 = time.perf_counter()

    async def worker() -> None:
        while True:
            try:
                it = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            res = await _run_one(it, engine, ctx)
            if meter is not None:  # waits for the generations that overlapped this episode's (their tokens split it)
                await meter.settle(res)
            res = _store(store, it, res)
            stats.done += 1
            if res.status == "failed":
                stats.failed += 1
            if on_done:
                on_done(res)

    benches = list({id(it.benchmark): it.benchmark for it in items}.values())
    ready: list[Benchmark] = []
    try:
        for b in benches:
            await b.setup()
            ready.append(b)
        await asyncio.gather(*(worker() for _ in range(limit)))
    finally:
        for b in reversed(ready):
            await b.teardown()
    stats.wall_s = time.perf_counter() - t0
    return stats


async def _run_one(it: WorkItem, engine: Engine, ctx: RunContext) -> EpisodeResult:
    started = time.time()
    try:
        res = await it.benchmark.run_episode(it.episode, engine, ctx, it.repeat)
    except asyncio.CancelledError:
        raise
    except (Exception, SystemExit) as e:  # a bug, a plugin's sys.exit() too, must not end the run: record it
        res = _failed(it, "crash", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
    res.started_at = res.started_at or started
    res.finished_at = time.time()
    if res.seed is None:  # every benchmark samples a repeat with `repeat_sampling`, so this is the seed it used
        res.seed = repeat_seed(ctx.sampling.seed, it.repeat)
    return res


def _store(store: Store, it: WorkItem, res: EpisodeResult) -> EpisodeResult:
    """Store one result; a failure to store it (after the store's own sanitizing) is recorded as that episode's
    failure, so that one result can never stop the run. A duplicate key is a real conflict and is raised; so is a full
    disk (a StorageError): it is no fault of the episode, which must run again on resume, not be stored as failed."""
    try:
        return store.write(res)
    except DuplicateResult:
        raise
    except Exception as e:
        full = storage_error(e, store.path)
        if full is not None:
            raise full from None
        why = f"the result could not be stored: {type(e).__name__}: {str(e)[:500]}"
        failed = _failed(it, "store_error", why, started_at=res.started_at, finished_at=res.finished_at)
        failed.seed = res.seed
        return store.write(failed)


def _failed(
    it: WorkItem, category: str, error: str, started_at: float | None = None, finished_at: float | None = None
) -> EpisodeResult:
    """The item's episode recorded as failed: what went wrong, in place of its result."""
    return EpisodeResult(
        benchmark=it.benchmark.name,
        episode_id=it.episode.id,
        repeat=it.repeat,
        tags=it.episode.tags,
        status="failed",
        error_category=category,
        error=error,
        started_at=started_at,
        finished_at=finished_at,
    )
