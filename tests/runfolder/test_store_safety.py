"""No reply can stop a run through the store: results JSON cannot hold are stored sanitized, with the reason, and a
result that still cannot be stored is that episode's recorded failure."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.execution import runner
from rig.execution.runner import plan, run_items
from rig.records import EpisodeResult, Generation, ParsedCall, Sampling, ToolCall
from rig.runfolder.store import Store
from rig.runformat import read_results
from tests.fakes import FakeEngine

# Replies that stopped runs for good (issue 18): a lone surrogate, a YAML surrogate pair, YAML bytes, a
# self-referencing alias, 400 nested brackets.
REPLIES = [
    '["\\ud83d"]',
    'a: "\\ud83d\\ude00"',
    "!!binary //79",
    "&a [*a]",
    "[" * 400 + "]" * 400,
    "- !!binary //79",
    "- &a [*a]",
]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_replies_json_cannot_hold_are_stored_and_read_back(tmp_path: Path, fmt: str) -> None:
    b = CallNavi(None, {"format": fmt, "task": "routing"})
    eps = b.episodes()[: len(REPLIES)]
    replies = iter(REPLIES)  # one call per episode, in order

    def answer(_req) -> str:  # type: ignore[no-untyped-def]
        return next(replies)

    store = Store(tmp_path / "r.sqlite")
    stats = asyncio.run(
        run_items(plan([(b, eps)], 1, order="given"), FakeEngine(answer), store, RunContext(sampling=Sampling()))
    )
    store.close()
    assert stats.done == len(eps)
    back = read_results(tmp_path / "r.sqlite")
    assert len(back) == len(eps)  # every episode stored and readable: the report can be made
    # Since the bounded readers (rig/decoding/safe.py) refuse these replies as format errors, they no longer need
    # sanitizing in the store; either way each one is a scored result with its reason, never a crash. The store's
    # own sanitizing is tested on values built directly, below.
    for r in back:
        assert r.status == "scored", (r.episode_id, r.error)
        assert "stored with replacements" in (r.error or "") or r.error_category, (r.episode_id, r.error)


def test_tool_call_arguments_json_cannot_hold_are_stored(tmp_path: Path) -> None:
    loop: list = []
    loop.append(loop)
    nested: list = []
    for _ in range(400):
        nested = [nested]
    args = {"q": "\ud83d", "raw": b"\xff\xfe", "loop": loop, "deep": nested, "nan": float("nan")}
    res = EpisodeResult(
        benchmark="b",
        episode_id="e\ud800",
        repeat=0,
        output={"x": b"\x00"},
        generations=[Generation(request_hash="h", text="t\udc00", tool_calls=[ParsedCall(name="f", arguments=args)])],
        tool_calls=[ToolCall(name="f", arguments=args)],
    )
    store = Store(tmp_path / "r.sqlite")
    stored = store.write(res)
    store.close()
    (back,) = read_results(tmp_path / "r.sqlite")
    assert back == stored
    assert back.episode_id == "e\ufffd" and back.output == {"x": "base64:AA=="}
    for reason in ("bytes", "lone surrogate", "self-reference", "nested deeper than 64", "non-finite number"):
        assert reason in (back.error or ""), reason


def test_an_episode_that_cannot_be_stored_is_recorded_as_failed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    b = CallNavi(None, {"task": "routing"})
    eps = b.episodes()[:3]
    real = runner.Store.write

    def write(self: Store, res: EpisodeResult) -> EpisodeResult:
        if res.episode_id == eps[1].id and res.status != "failed":
            raise RecursionError("maximum recursion depth exceeded")
        return real(self, res)

    monkeypatch.setattr(Store, "write", write)
    store = Store(tmp_path / "r.sqlite")
    stats = asyncio.run(
        run_items(
            plan([(b, eps)], 1, order="given"), FakeEngine(lambda r: "[]"), store, RunContext(sampling=Sampling())
        )
    )
    assert stats.done == 3 and stats.failed == 1
    bad = [r for r in store.results() if r.status == "failed"]
    store.close()
    assert [r.episode_id for r in bad] == [eps[1].id]
    assert bad[0].error_category == "store_error" and "RecursionError" in (bad[0].error or "")


@pytest.mark.parametrize(("fmt", "mode"), [("json", "paper"), ("yaml", "paper"), ("json", "reference")])
def test_every_regression_reply_is_a_scored_failure_in_the_store(tmp_path: Path, fmt: str, mode: str) -> None:
    """Each reply of tests/readers.py's REGRESSIONS through a real run of CallNavi's parameter task into the store:
    every one stored, scored, with its reason; none an engine crash (issue 18 items 1 and 4)."""
    from tests.readers import REGRESSIONS

    b = CallNavi(None, {"format": fmt, "task": "params", "mode": mode})
    eps = b.episodes()
    repeats = -(-len(REGRESSIONS) // len(eps))
    replies = iter(REGRESSIONS + ["{}"] * (repeats * len(eps) - len(REGRESSIONS)))
    store = Store(tmp_path / "r.sqlite")
    stats = asyncio.run(
        run_items(
            plan([(b, eps)], repeats, order="given"),
            FakeEngine(lambda _req: next(replies)),
            store,
            RunContext(sampling=Sampling()),
        )
    )
    store.close()
    back = read_results(tmp_path / "r.sqlite")
    assert stats.failed == 0 and len(back) == repeats * len(eps)
    for r in back:
        assert r.status == "scored" and r.error_category != "crash", (r.episode_id, r.repeat, r.error)
        assert r.error and r.scores.get("ast") == 0.0, (r.episode_id, r.repeat, r.error)
