"""`rig rescore` for MobilityBench: ``raw_results.json`` (``mbench run``), one record per case with ``case_id``,
``planner_output`` (``thinking``, ``intent``, ``steps``), ``worker_output`` (records with ``tool_calls`` of ``id``,
``name`` and ``args``, and ``tool_results``: each call's answer by call id, the sandbox's ``{status, data, error}``
envelope as text), ``reporter_output``, ``token_usage`` per stage and ``error``. Each file is one repeat."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

from rig.benchmarks.base import Benchmark, DataError
from rig.benchmarks.mobilitybench.benchmark import MobilityBench
from rig.benchmarks.predictions import PredictionError, Scorer, external_generation, load_predictions, short
from rig.records import EpisodeResult, ToolCall


class MobilityBenchScorer(Scorer):
    name = benchmark = "mobilitybench"
    predictions = "MobilityBench raw_results.json files (one per repeat)"

    @classmethod
    def options(cls, bench: type[Benchmark], options: dict[str, Any], mode: str) -> dict[str, Any]:
        options = super().options(bench, options, mode)
        # raw_results.json is what upstream's Plan-and-Execute harness writes (planner, workers, reporter)
        if options.setdefault("framework", "plan") != "plan":
            raise DataError(
                f"-O framework={options['framework']}: raw_results.json is written by the Plan-and-Execute "
                "harness; leave framework out (plan)"
            )
        if mode == "reference":
            # The reference's similarity is character Jaccard unless a model directory is named; loading the
            # packaged MiniLM only for the secondary paper table made a reference rescore about 10x slower. The
            # paper table names the similarity it used; -O similarity=minilm restores it.
            options.setdefault("similarity", "jaccard")
        return options

    def read(self, bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
        """Each raw_results.json as one repeat of scored results (both metric modes stored, ``mode``'s keys plain)
        and the model names its records carry."""
        assert isinstance(bench, MobilityBench)
        return _read(bench, files, mode)


def _read(bench: MobilityBench, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
    from rig.benchmarks.mobilitybench import scoring as M
    from rig.benchmarks.mobilitybench.data import Case

    cases = {e.id: Case.model_validate(e.ground_truth) for e in bench.episodes()}
    backend = bench.backend()
    ref_backend = bench.reference_backend()  # the reference's similarity
    framework = bench.opts.framework
    out: list[EpisodeResult] = []
    models: set[str] = set()
    for repeat, f in enumerate(files):
        rows = load_predictions(f)
        if not isinstance(rows, list):
            raise PredictionError(
                f"{f}: expected a list of per-case records (raw_results.json), got {type(rows).__name__}"
            )
        seen: set[str] = set()
        for i, row in enumerate(rows):
            where = f"{f}: record {i}"
            if not isinstance(row, dict):
                raise PredictionError(f"{where}: not an object")
            cid = str(row.get("case_id", ""))
            if cid not in cases:
                raise PredictionError(f"{where}, field case_id: {cid!r} is not a case of {bench.data}")
            if cid in seen:
                raise PredictionError(f"{where}, field case_id: {cid!r} appears twice")
            seen.add(cid)
            if row.get("model_name"):
                models.add(str(row["model_name"]))
            case = cases[cid]
            pred, distinct, has_constraints, records = _prediction(where, row)
            listed = pred.calls
            paper_pred = pred.model_copy(update={"calls": distinct})
            both = {
                "paper": M.score(paper_pred, case.truth, "paper", backend),
                # the file's worker records already repeat earlier steps' calls, as the evaluator reads them
                "reference": M.score(pred, case.truth, "reference", ref_backend),
            }
            if not has_constraints:
                both["paper"]["IE"] = None  # the upstream planner writes no constraint object: not measured
            if listed and all(c.ok is None for c in listed):
                # paper DR needs a successful call; without tool results in the file that is not measured
                both["paper"]["DR"] = both["paper"]["FPR"] = None
            scores: dict[str, float | None] = dict(both[mode])
            for m_, s in both.items():
                scores.update({f"{m_}:{k}": v for k, v in s.items()})
            stop = "engine_error" if pred.errored else ("final" if pred.delivered else "no_final_answer")
            res = EpisodeResult(
                benchmark="mobilitybench",
                episode_id=cid,
                repeat=repeat,
                tags={
                    "scenario": case.scenario,
                    "family": case.family,
                    "framework": framework,
                    "mode": mode,
                    "similarity_model": backend.name,
                    "reference_similarity_model": ref_backend.name,
                    "stop": stop,
                    "lang": case.truth.lang,
                    "source": f.name,
                },
                generations=[external_generation(str(row.get("reporter_output") or ""))],
                tool_calls=records,  # the worker records' calls as listed (what the token table counts)
                output={"final": row.get("reporter_output"), "stop": stop, "intent": pred.intent, "steps": pred.steps},
                scores=scores,
                finished_at=time.time(),
            )
            if pred.errored:
                res.status, res.error_category, res.error = "failed", "engine_error", str(row.get("error"))
            else:
                res.error_category = M.classify(stop, scores)
            out.append(res)
    return out, models


def _prediction(where: str, row: dict[str, Any]) -> tuple[Any, list[Any], bool, list[ToolCall]]:
    from rig.benchmarks.mobilitybench import scoring as M
    from rig.benchmarks.mobilitybench.scoring.reference import ref_content

    planner = row.get("planner_output") or {}
    if not isinstance(planner, dict):
        raise PredictionError(f"{where}, field planner_output: expected an object")
    steps_raw = planner.get("steps")
    steps = None
    if planner:
        steps = (
            [str(t) for s in (steps_raw or []) for t in (s if isinstance(s, list) else [s])]
            if isinstance(steps_raw, list)
            else ([str(steps_raw)] if steps_raw else [])
        )
    workers = row.get("worker_output") or []
    if not isinstance(workers, list):
        raise PredictionError(f"{where}, field worker_output: expected a list of worker records")
    calls, distinct, seen, records = [], [], set(), []
    for w, rec in enumerate(workers):
        tcs = (rec.get("tool_calls") or []) if isinstance(rec, dict) else []
        if not isinstance(tcs, list):
            raise PredictionError(
                f"{where}, field worker_output[{w}].tool_calls: expected a list of calls, got {type(tcs).__name__}"
            )
        answers = rec.get("tool_results") if isinstance(rec, dict) else None
        answers = answers if isinstance(answers, dict) else {}  # {tool call id: the ToolMessage's content}
        for tc in tcs:
            if not isinstance(tc, dict) or not tc.get("name"):
                raise PredictionError(f"{where}, field worker_output[{w}].tool_calls: a call without a name")
            cid = str(tc.get("id") or "")
            ok = _answer_ok(answers[cid]) if cid and cid in answers else None
            call = M.Call(name=str(tc["name"]), arguments=tc.get("args") or {}, task=w, ok=ok)
            calls.append(call)
            args = tc.get("args")
            records.append(
                ToolCall(
                    name=call.name,
                    arguments=args if isinstance(args, dict) else {},
                    answer=answers.get(cid),
                    error_category="failed" if ok is False else None,
                    step=w,
                )
            )
            # Paper mode counts each call once: later worker records repeat the calls of earlier plan steps, under
            # the same id (without ids, an identical name and arguments is taken as the same call).
            key = cid or json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)
            if key not in seen:
                seen.add(key)
                distinct.append(call)
    report = row.get("reporter_output") or ""
    if not isinstance(report, str):
        raise PredictionError(f"{where}, field reporter_output: expected text")
    stages = _token_usage(where, row.get("token_usage"))
    prompt = [s["prompt_tokens"] for s in stages.values() if "prompt_tokens" in s]
    completion = [s["completion_tokens"] for s in stages.values() if "completion_tokens" in s]
    errored = bool(row.get("error"))
    constraints = planner.get("constraints")
    pred = M.Prediction(
        intent=str(planner.get("intent") or "") if planner else None,
        constraints=constraints if isinstance(constraints, dict) else None,
        thinking=str(planner.get("thinking") or ""),
        steps=steps,
        calls=calls,
        content=ref_content(report) if report.strip() else None,
        report=report,
        delivered=bool(report.strip()) and not errored,
        errored=errored,
        # paper IT/OT: not reported (None) when no stage reports the count, never 0
        prompt_tokens=sum(prompt) if prompt else None,
        completion_tokens=sum(completion) if completion else None,
        usage=M.stage_usage(stages),
    )
    return pred, distinct, isinstance(constraints, dict), records


_STAGES = ("Planner", "Worker", "Reporter")
_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _token_usage(where: str, usage: Any) -> dict[str, dict[str, int]]:
    """The harness's ``token_usage`` ({"planner": {"prompt_tokens": n, ...}, ...}) as counts per stage; a count that
    is not a whole number of tokens (NaN, infinite, text, negative) is bad input naming the field."""
    if usage is None:
        return {st: {} for st in _STAGES}
    if not isinstance(usage, dict):
        raise PredictionError(f"{where}, field token_usage: expected an object of stages, got {type(usage).__name__}")
    out: dict[str, dict[str, int]] = {}
    for st in _STAGES:
        stage = usage.get(st.lower())
        if stage is None:
            out[st] = {}
            continue
        if not isinstance(stage, dict):
            raise PredictionError(
                f"{where}, field token_usage.{st.lower()}: expected an object of token counts, got "
                f"{type(stage).__name__}"
            )
        counts: dict[str, int] = {}
        for k in _COUNTS:
            v = stage.get(k)
            if v is None:
                continue
            whole = isinstance(v, float) and math.isfinite(v) and v.is_integer()
            if isinstance(v, bool) or not (isinstance(v, int) or whole) or v < 0:
                raise PredictionError(
                    f"{where}, field token_usage.{st.lower()}.{k}: expected a whole number of tokens, got {short(v)}"
                )
            counts[k] = int(v)
        out[st] = counts
    return out


_TOOL_FAILED = re.compile(r"^\s*(error\b|unknown tool\b|tool \S+ execution failed\b)", re.IGNORECASE)


def _answer_ok(answer: Any) -> bool:
    """Whether a tool answer was a success. The sandbox answers ``{status, data, error}`` with status 0 SUCCESS and
    1 FAILED (written as JSON, or as a Python literal with ``<ToolStatus...>``); a tool that raised, or an unknown
    tool, leaves text ("Tool X execution failed: ...", "Unknown tool: X", "Error: ...")."""
    from rig.benchmarks.mobilitybench.scoring.text import repair_literal

    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            parsed = repair_literal(answer) if answer.lstrip().startswith("{") else None
            answer = parsed if isinstance(parsed, dict) else answer
    if isinstance(answer, dict):
        status = str(answer.get("status", "0")).strip().upper()
        return not answer.get("error") and status in ("0", "SUCCESS")
    return not _TOOL_FAILED.match(str(answer))
