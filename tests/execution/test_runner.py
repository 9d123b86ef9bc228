import asyncio
import itertools
import json
from pathlib import Path

import pytest

from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.execution.runner import plan, run_items
from rig.records import Sampling
from rig.runfolder.store import DuplicateResult, Store
from tests.fakes import FakeEngine


def oracle(bench: CallNavi):  # type: ignore[no-untyped-def]
    """Answers every CallNavi question correctly, from the ground truth the prompt's question maps to."""
    by_text = {q.text: q for d in bench.domains().values() for q in d.questions}

    def answer(req) -> str:  # type: ignore[no-untyped-def]
        prompt = req.messages[-1].content
        q = next(q for t, q in by_text.items() if f"Question start\n{t}\n" in prompt)
        if "names only" in prompt:
            return json.dumps(q.apis)
        return json.dumps({"API": q.apis, "parameters": q.parameters})

    return answer


def run(items, engine, store, concurrency=1):  # type: ignore[no-untyped-def]
    ctx = RunContext(sampling=Sampling())
    return asyncio.run(run_items(items, engine, store, ctx, concurrency=concurrency))


def test_grouped_order_keeps_prefix_groups_together(callnavi_data: Path) -> None:
    b = CallNavi(callnavi_data, {"domains": "hr,hospital"})
    eps = b.episodes()
    shuffled = plan([(b, eps)], 2, order="shuffled", seed=1)
    grouped = plan([(b, [it.episode for it in shuffled if it.repeat == 0])], 2, order="grouped")
    groups = [it.episode.prefix_group for it in grouped]
    # each group appears as one contiguous block
    assert sum(1 for a, b_ in itertools.pairwise(groups) if a != b_) == len(set(groups)) - 1
    # repeats of an episode are adjacent
    assert all(grouped[i].episode.id == grouped[i + 1].episode.id for i in range(0, len(grouped), 2))
    assert len(grouped) == len(eps) * 2


def test_oracle_scores_one_and_store_roundtrip(tmp_path: Path) -> None:
    b = CallNavi()
    eps = b.episodes()
    store = Store(tmp_path / "r.sqlite")
    stats = run(plan([(b, eps)], 1), FakeEngine(oracle(b)), store)
    assert stats.done == len(eps) and stats.failed == 0
    res = store.results("callnavi")
    assert len(res) == len(eps)
    assert all(r.scores.get("ast", r.scores.get("routing")) == 1.0 for r in res)
    t4 = b.tables(res, b.opts)[0]
    assert t4.rows[0][1:] == [1.0] * 11


def test_crash_is_recorded_not_raised_and_resume_skips_done(tmp_path: Path) -> None:
    b = CallNavi()
    eps = b.episodes()
    store = Store(tmp_path / "r.sqlite")
    items = plan([(b, eps)], 1)
    target = b.domains()["maps"].questions[3].text
    eng = FakeEngine(oracle(b), fail_on=target)
    stats = run(items, eng, store)
    assert stats.failed == 2  # both tasks of that question
    failed = [r for r in store.results() if r.status == "failed"]
    assert {r.error_category for r in failed} == {"crash"} and "engine exploded" in failed[0].error
    # a second pass over the same items does nothing: every key is done
    eng2 = FakeEngine(oracle(b))
    stats2 = run(items, eng2, store)
    assert stats2.skipped == len(items) and eng2.calls == []
    with pytest.raises(DuplicateResult):
        store.write(store.results()[0])


def test_concurrency_respected(tmp_path: Path) -> None:
    b = CallNavi()
    eps = b.episodes()[:12]
    eng = FakeEngine(oracle(b), delay=0.05, concurrency=4)
    stats = run(plan([(b, eps)], 1), eng, Store(tmp_path / "r.sqlite"), concurrency=8)
    assert eng.max_in_flight == 4 and stats.done == 12
    serial = FakeEngine(oracle(b), delay=0.01, concurrency=1)
    run(plan([(b, eps)], 1), serial, Store(tmp_path / "s.sqlite"), concurrency=8)
    assert serial.max_in_flight == 1


class Hooked(CallNavi):
    """CallNavi that logs its lifecycle; the episode named ``bad`` raises inside the benchmark."""

    def __init__(self, bad: str = "") -> None:
        super().__init__()
        self.bad, self.log = bad, []  # type: ignore[var-annotated]

    async def setup(self) -> None:
        self.log.append("setup")

    async def teardown(self) -> None:
        self.log.append("teardown")

    async def run_episode(self, episode, engine, ctx, repeat):  # type: ignore[no-untyped-def]
        self.log.append("episode")
        if episode.id == self.bad:
            raise RuntimeError("benchmark bug")
        return await super().run_episode(episode, engine, ctx, repeat)


def test_setup_before_and_teardown_after_episodes_also_when_one_fails(tmp_path: Path) -> None:
    b = Hooked()
    eps = b.episodes()[:4]
    b.bad = eps[1].id
    stats = run(plan([(b, eps)], 1), FakeEngine(oracle(b)), Store(tmp_path / "r.sqlite"))
    assert stats.failed == 1
    assert b.log == ["setup"] + ["episode"] * 4 + ["teardown"]


def test_teardown_runs_when_the_run_is_aborted(tmp_path: Path) -> None:
    b = Hooked()
    eps = b.episodes()[:4]

    def stop(_res) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        asyncio.run(
            run_items(
                plan([(b, eps)], 1),
                FakeEngine(oracle(b)),
                Store(tmp_path / "r.sqlite"),
                RunContext(sampling=Sampling()),
                on_done=stop,
            )
        )
    assert b.log == ["setup", "episode", "teardown"]


def test_an_episode_that_calls_sys_exit_is_a_recorded_crash_not_the_end_of_the_run(tmp_path: Path) -> None:
    """A plugin's engine or benchmark calling sys.exit() mid-episode (exit 0: the run would end 'successfully'
    having run nothing more) is that episode's failure, like any other exception."""
    b = CallNavi()
    eps = b.episodes()
    target = b.domains()["maps"].questions[3].text

    def answer(req):  # type: ignore[no-untyped-def]
        if target in req.messages[-1].content:
            raise SystemExit(0)
        return oracle(b)(req)

    store = Store(tmp_path / "r.sqlite")
    stats = run(plan([(b, eps)], 1), FakeEngine(answer), store)
    assert stats.done == len(eps) and stats.failed == 2
    failed = [r for r in store.results() if r.status == "failed"]
    assert {r.error_category for r in failed} == {"crash"} and failed[0].error.startswith("SystemExit: 0")
