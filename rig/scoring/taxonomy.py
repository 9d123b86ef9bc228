"""One failure taxonomy for every benchmark: each episode that is not a success gets one primary class from the
fixed list below. Each benchmark maps its own failure reasons (``Benchmark.failure_detail``, which stays the detail)
to a class through its ``failure_classes`` table; a reason the table lacks, and every reason of a plugin that gives
no table, is "other" and counted as unmapped.

Two rules come before a benchmark's table, because no benchmark can tell them apart from its own reasons: an episode
stored as failed (no reply to score: the engine or the harness failed) is an engine error, or a context overflow when
the error says the prompt did not fit; and a reply a benchmark calls malformed that stopped at max_tokens is "cut at
max_tokens".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, get_args

from rig.records import EpisodeResult

FailureClass = Literal[
    "malformed_output",
    "cut_at_max_tokens",
    "wrong_tool",
    "wrong_argument",
    "invented_entity",
    "budget_spent",
    "context_overflow",
    "engine_error",
    "judge_failure",
    "wrong_answer",
    "other",
]
FAILURE_CLASSES: tuple[str, ...] = get_args(FailureClass)

# The documented meaning of each class (the report prints it under the table; docs/architecture.md repeats it).
MEANING: dict[str, str] = {
    "malformed_output": "no answer or call could be read from the reply (parse failure, no call, re-prompts spent)",
    "cut_at_max_tokens": "the reply stopped at max_tokens before a readable answer",
    "wrong_tool": "a tool or API the task does not need was called, or the API list is wrong",
    "wrong_argument": "the right tool with a wrong, missing or invalid argument or value",
    "invented_entity": "an API, station, POI or place the tools never returned or the list never declared",
    "budget_spent": "the step or tool-call budget ran out before a final answer",
    "context_overflow": "the prompt did not fit the model's context",
    "engine_error": "the engine or the harness failed: no reply to score",
    "judge_failure": "the judge model failed or its verdict could not be read",
    "wrong_answer": "a readable, well-formed answer that is wrong",
    "other": "a reason the benchmark does not map (a plugin's, or one rig's tables lack)",
}

_CONTEXT = re.compile(
    r"context[_ ](length|window|size)|n_ctx|num_ctx|maximum context|exceeds? the context|truncated", re.IGNORECASE
)


def classify(result: EpisodeResult, detail: str, table: Mapping[str, FailureClass]) -> tuple[FailureClass, bool]:
    """(primary class, mapped) of a failed episode whose benchmark gives ``detail`` as its reason; ``mapped`` False
    when neither the shared rules nor ``table`` know the reason (the class is then "other")."""
    if result.status == "failed":
        said = [result.error or ""] + [g.error for g in result.generations if g.error]
        return ("context_overflow" if any(_CONTEXT.search(s) for s in said) else "engine_error"), True
    cls = table.get(detail)
    if cls is None:
        return "other", False
    last = result.generations[-1] if result.generations else None
    if cls == "malformed_output" and last is not None and last.finish_reason == "length":
        return "cut_at_max_tokens", True
    return cls, True
