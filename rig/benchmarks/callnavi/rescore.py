"""`rig rescore` for CallNavi: the per-domain model-output lists of the public harness, aligned with
``Questions/<domain>.json`` by position: ``<domain>_<iteration>_para_<model>.json`` (``predict.py``: ``predict`` is the
raw answer text, scored as the params task) and ``<domain>_<iteration>_APIonly_<model>.json`` (routing; key
``predict``, or ``predit`` as the routing judge spells it). A ``ground_truth`` field, when present, must equal the
question's, so a file aligned with another version of the data is refused rather than mis-scored. Each distinct
iteration of a task is one repeat (the n-th iteration of the routing files and the n-th of the params files are repeat
n)."""

from __future__ import annotations

import ast
import re
import time
from pathlib import Path
from typing import Any

from rig.benchmarks.base import Benchmark, nesting_error
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.benchmarks.callnavi.scoring import score_both
from rig.benchmarks.predictions import PredictionError, Scorer, external_generation, load_predictions
from rig.records import EpisodeResult

_CALLNAVI_NAME = re.compile(r"^(?P<domain>[A-Za-z]+)_(?P<it>\d+)_(?P<kind>para|APIonly)_(?P<model>.+)\.json$")


class CallNaviScorer(Scorer):
    name = benchmark = "callnavi"
    predictions = "CallNavi output files (<domain>_<iteration>_para|APIonly_<model>.json)"

    def read(self, bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
        """The output files as scored results (both metric modes stored, ``mode``'s keys plain) and the model names
        the file names carry."""
        assert isinstance(bench, CallNavi)
        return _read(bench, files, mode)


def _read(bench: CallNavi, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
    domains = bench.domains()
    named = []
    for f in files:
        m = _CALLNAVI_NAME.match(f.name)
        if not m:
            raise PredictionError(
                f"{f}: not a CallNavi output file name (<domain>_<iteration>_para_<model>.json or "
                "<domain>_<iteration>_APIonly_<model>.json)"
            )
        if m["domain"] not in domains:
            raise PredictionError(
                f"{f}: domain {m['domain']!r} is not in the data ({', '.join(domains)}); pass --data or -O domains=..."
            )
        named.append((f, m))
    # Repeats count per task: upstream writes routing as iteration 1 (`<d>_1_APIonly_`) and judges params from
    # iteration 0 (`<d>_0_para_`), so the two files of one pass are one repeat, not two half-filled ones.
    iterations = {kind: sorted({int(m["it"]) for _, m in named if m["kind"] == kind}) for kind in ("para", "APIonly")}
    models = {m["model"] for _, m in named}
    out: list[EpisodeResult] = []
    seen: set[tuple[str, int]] = set()
    for f, m in named:
        questions = domains[m["domain"]].questions
        rows = load_predictions(f)
        if not isinstance(rows, list) or len(rows) != len(questions):
            got = f"{len(rows)} records" if isinstance(rows, list) else type(rows).__name__
            raise PredictionError(
                f"{f}: expected a list of {len(questions)} records, one per question of "
                f"{m['domain']} in order; got {got}"
            )
        task = "params" if m["kind"] == "para" else "routing"
        repeat = iterations[m["kind"]].index(int(m["it"]))
        for i, (row, q) in enumerate(zip(rows, questions, strict=True)):
            where = f"{f}: record {i}"
            if not isinstance(row, dict):
                raise PredictionError(f"{where}: not an object")
            key = "predict" if "predict" in row else "predit"
            text = row.get(key)
            if not isinstance(text, str):
                raise PredictionError(
                    f"{where}, field predict: expected the raw answer text, got "
                    f"{type(text).__name__} (washed files are not model outputs)"
                )
            gt = {"API": q.apis, "parameters": q.parameters}
            if "ground_truth" in row:
                _check_gt(where, row["ground_truth"], gt if task == "params" else q.apis, q.id)
            if (f"{q.id}/{task}", repeat) in seen:
                raise PredictionError(f"{where}: question {q.id} ({task}, iteration {m['it']}) is in two files")
            seen.add((f"{q.id}/{task}", repeat))
            # both modes scored and stored (the main one's keys plain), as a run does
            scores, value, reason = score_both(text, gt, task, "json", mode)
            res = EpisodeResult(
                benchmark="callnavi",
                episode_id=f"{q.id}/{task}",
                repeat=repeat,
                tags={
                    "domain": m["domain"],
                    "difficulty": q.difficulty,
                    "task": task,
                    "question": q.id,
                    "mode": mode,
                    "iteration": m["it"],
                    "source": f.name,
                },
                generations=[external_generation(text, reason is None or reason.startswith(("ast:", "routing:")))],
                output=value,
                scores=scores,
                finished_at=time.time(),
            )
            res.error_category = None if reason is None else reason.split(":")[0]
            res.error = reason
            out.append(res)
    return out, models


# A ground truth is an API list with its parameters: a few hundred characters; 20,000 is far above any in the data.
MAX_GT_CHARS = 20_000


def _check_gt(where: str, stored: Any, expected: Any, qid: str) -> None:
    value = stored
    if isinstance(stored, str):
        if len(stored) > MAX_GT_CHARS:  # ast.literal_eval's parser can run out of memory on long text
            raise PredictionError(f"{where}, field ground_truth: {len(stored):,} characters, over {MAX_GT_CHARS:,}")
        try:
            value = ast.literal_eval(stored)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise PredictionError(f"{where}, field ground_truth: not a Python literal") from None
        err = nesting_error(value)
        if err:
            raise PredictionError(f"{where}, field ground_truth: {err}")
    if value != expected:
        raise PredictionError(
            f"{where}, field ground_truth: differs from question {qid} in the data (records are "
            "aligned by position; is this file from another version of the data?)"
        )
