"""The shared failure taxonomy: the rules before a benchmark's table, and a reason no table maps."""

from __future__ import annotations

from rig.records import EpisodeResult, Generation
from rig.scoring.taxonomy import FAILURE_CLASSES, MEANING, classify


def _result(**kw) -> EpisodeResult:  # type: ignore[no-untyped-def]
    return EpisodeResult(benchmark="b", episode_id="e", repeat=0, **kw)


def test_every_class_is_documented() -> None:
    assert set(MEANING) == set(FAILURE_CLASSES)


def test_a_failed_episode_is_an_engine_error_or_a_context_overflow() -> None:
    crash = _result(status="failed", error_category="crash", error="RuntimeError: boom")
    assert classify(crash, "crash", {}) == ("engine_error", True)
    cut_prompt = _result(
        status="failed",
        error_category="engine_error",
        generations=[Generation(request_hash="h", error="prompt has 8951 tokens, context_length is 8192")],
    )
    assert classify(cut_prompt, "engine_error", {"engine_error": "wrong_answer"}) == ("context_overflow", True)


def test_a_malformed_reply_stopped_at_max_tokens_is_cut() -> None:
    table = {"parse": "malformed_output"}
    cut = _result(generations=[Generation(request_hash="h", finish_reason="length")])
    whole = _result(generations=[Generation(request_hash="h", finish_reason="stop")])
    assert classify(cut, "parse", table) == ("cut_at_max_tokens", True)
    assert classify(whole, "parse", table) == ("malformed_output", True)


def test_a_reason_the_table_lacks_is_other_and_unmapped() -> None:
    assert classify(_result(error_category="novel"), "novel", {"parse": "malformed_output"}) == ("other", False)
