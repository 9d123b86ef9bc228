"""`rig rescore`: score predictions made outside rig, in the reference harness's own per-case files, with rig's
metrics in paper and reference mode (``--mode`` picks the main one; both are stored, as a run stores them), into a
normal run folder (manifest + results.sqlite) that `rig report`, `--html` and `rig export` read like any other.

Formats read (as the public harnesses write them):

* CallNavi: the per-domain model-output lists, aligned with ``Questions/<domain>.json`` by position:
  ``<domain>_<iteration>_para_<model>.json`` (``predict.py``: ``predict`` is the raw answer text, scored as the
  params task) and ``<domain>_<iteration>_APIonly_<model>.json`` (routing; key ``predict``, or ``predit`` as the
  routing judge spells it). A ``ground_truth`` field, when present, must equal the question's, so a file aligned
  with another version of the data is refused rather than mis-scored. Each distinct iteration of a task is one
  repeat (the n-th iteration of the routing files and the n-th of the params files are repeat n).
* MobilityBench: ``raw_results.json`` (``mbench run``): one record per case with ``case_id``, ``planner_output``
  (``thinking``, ``intent``, ``steps``), ``worker_output`` (records with ``tool_calls`` of ``id``, ``name`` and
  ``args``, and ``tool_results``: each call's answer by call id, the sandbox's ``{status, data, error}`` envelope
  as text), ``reporter_output``, ``token_usage`` per stage and ``error``. Each file is one repeat.
"""

from __future__ import annotations

import ast
import json
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import Benchmark, DataError, UnreadableJson, nesting_error, read_json
from rig.records import EpisodeResult, Generation, ToolCall
from rig.registry import EXTERNAL, ModelSpec, Weights
from rig.runs.config import BenchmarkInfo, RunConfig
from rig.runs.manifest import RunManifest, new_run_id, package_versions
from rig.runs.store import Store

RESCORABLE = ("callnavi", "mobilitybench")


class RescoreError(Exception):
    """Bad input (a file or a field in it); str() names them and is shown to the user."""


class RescoreOptions(BaseModel):
    benchmark: Literal["callnavi", "mobilitybench"]
    predictions: list[Path]
    data: Path | None = None
    mode: Literal["paper", "reference"] = "paper"
    label: str | None = None  # the model name in tables; default: from the file names, else "external"
    out: Path = Path("runs")
    options: dict[str, Any] = Field(default_factory=dict)  # benchmark options other than mode


def _load_json(path: Path) -> Any:
    """A prediction file: the benchmarks' own reader, its errors worded as rescore's ("not readable JSON")."""
    try:
        return read_json(path)
    except UnreadableJson as e:
        raise RescoreError(f"{path}: not readable JSON ({e.detail})") from None
    except DataError as e:  # missing, a folder, unreadable, or nested past what any record needs
        raise RescoreError(str(e)) from None


def _generation(text: str, parse_ok: bool | None = None) -> Generation:
    if parse_ok is None:
        return Generation(request_hash="external", text=text)
    return Generation(request_hash="external", text=text, parse_status="ok" if parse_ok else "parse_error")


# -- CallNavi ----------------------------------------------------------------------------------------------------

_CALLNAVI_NAME = re.compile(r"^(?P<domain>[A-Za-z]+)_(?P<it>\d+)_(?P<kind>para|APIonly)_(?P<model>.+)\.json$")


def _callnavi(bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
    from rig.benchmarks.callnavi.benchmark import score_both

    domains = bench.domains()  # type: ignore[attr-defined]
    named = []
    for f in files:
        m = _CALLNAVI_NAME.match(f.name)
        if not m:
            raise RescoreError(
                f"{f}: not a CallNavi output file name (<domain>_<iteration>_para_<model>.json or "
                "<domain>_<iteration>_APIonly_<model>.json)"
            )
        if m["domain"] not in domains:
            raise RescoreError(
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
        rows = _load_json(f)
        if not isinstance(rows, list) or len(rows) != len(questions):
            got = f"{len(rows)} records" if isinstance(rows, list) else type(rows).__name__
            raise RescoreError(
                f"{f}: expected a list of {len(questions)} records, one per question of "
                f"{m['domain']} in order; got {got}"
            )
        task = "params" if m["kind"] == "para" else "routing"
        repeat = iterations[m["kind"]].index(int(m["it"]))
        for i, (row, q) in enumerate(zip(rows, questions, strict=True)):
            where = f"{f}: record {i}"
            if not isinstance(row, dict):
                raise RescoreError(f"{where}: not an object")
            key = "predict" if "predict" in row else "predit"
            text = row.get(key)
            if not isinstance(text, str):
                raise RescoreError(
                    f"{where}, field predict: expected the raw answer text, got "
                    f"{type(text).__name__} (washed files are not model outputs)"
                )
            gt = {"API": q.apis, "parameters": q.parameters}
            if "ground_truth" in row:
                _check_gt(where, row["ground_truth"], gt if task == "params" else q.apis, q.id)
            if (f"{q.id}/{task}", repeat) in seen:
                raise RescoreError(f"{where}: question {q.id} ({task}, iteration {m['it']}) is in two files")
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
                generations=[_generation(text, reason is None or reason.startswith(("ast:", "routing:")))],
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
            raise RescoreError(f"{where}, field ground_truth: {len(stored):,} characters, over {MAX_GT_CHARS:,}")
        try:
            value = ast.literal_eval(stored)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise RescoreError(f"{where}, field ground_truth: not a Python literal") from None
        err = nesting_error(value)
        if err:
            raise RescoreError(f"{where}, field ground_truth: {err}")
    if value != expected:
        raise RescoreError(
            f"{where}, field ground_truth: differs from question {qid} in the data (records are "
            "aligned by position; is this file from another version of the data?)"
        )


# -- MobilityBench -----------------------------------------------------------------------------------------------


def _mobilitybench(bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
    from rig.benchmarks.mobilitybench import scoring as M
    from rig.benchmarks.mobilitybench.data import Case

    cases = {e.id: Case.model_validate(e.ground_truth) for e in bench.episodes()}
    backend = bench.backend()  # type: ignore[attr-defined]
    ref_backend = bench.reference_backend()  # type: ignore[attr-defined]  # the reference's similarity
    framework = bench.opts.framework
    out: list[EpisodeResult] = []
    models: set[str] = set()
    for repeat, f in enumerate(files):
        rows = _load_json(f)
        if not isinstance(rows, list):
            raise RescoreError(
                f"{f}: expected a list of per-case records (raw_results.json), got {type(rows).__name__}"
            )
        seen: set[str] = set()
        for i, row in enumerate(rows):
            where = f"{f}: record {i}"
            if not isinstance(row, dict):
                raise RescoreError(f"{where}: not an object")
            cid = str(row.get("case_id", ""))
            if cid not in cases:
                raise RescoreError(f"{where}, field case_id: {cid!r} is not a case of {bench.data}")
            if cid in seen:
                raise RescoreError(f"{where}, field case_id: {cid!r} appears twice")
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
                generations=[_generation(str(row.get("reporter_output") or ""))],
                tool_calls=records,  # the worker records' calls as listed (what the token table counts)
                output={"final": row.get("reporter_output"), "stop": stop, "intent": pred.intent, "steps": pred.steps},
                scores=scores,
                finished_at=time.time(),
            )
            if pred.errored:
                res.status, res.error_category, res.error = "failed", "engine_error", str(row.get("error"))
            else:
                from rig.benchmarks.mobilitybench.benchmark import classify

                res.error_category = classify(stop, scores)
            out.append(res)
    return out, models


def _prediction(where: str, row: dict[str, Any]) -> tuple[Any, list[Any], bool, list[ToolCall]]:
    from rig.benchmarks.mobilitybench import scoring as M
    from rig.benchmarks.mobilitybench.scoring.reference import ref_content

    planner = row.get("planner_output") or {}
    if not isinstance(planner, dict):
        raise RescoreError(f"{where}, field planner_output: expected an object")
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
        raise RescoreError(f"{where}, field worker_output: expected a list of worker records")
    calls, distinct, seen, records = [], [], set(), []
    for w, rec in enumerate(workers):
        tcs = (rec.get("tool_calls") or []) if isinstance(rec, dict) else []
        if not isinstance(tcs, list):
            raise RescoreError(
                f"{where}, field worker_output[{w}].tool_calls: expected a list of calls, got {type(tcs).__name__}"
            )
        answers = rec.get("tool_results") if isinstance(rec, dict) else None
        answers = answers if isinstance(answers, dict) else {}  # {tool call id: the ToolMessage's content}
        for tc in tcs:
            if not isinstance(tc, dict) or not tc.get("name"):
                raise RescoreError(f"{where}, field worker_output[{w}].tool_calls: a call without a name")
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
        raise RescoreError(f"{where}, field reporter_output: expected text")
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
        raise RescoreError(f"{where}, field token_usage: expected an object of stages, got {type(usage).__name__}")
    out: dict[str, dict[str, int]] = {}
    for st in _STAGES:
        stage = usage.get(st.lower())
        if stage is None:
            out[st] = {}
            continue
        if not isinstance(stage, dict):
            raise RescoreError(
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
                raise RescoreError(
                    f"{where}, field token_usage.{st.lower()}.{k}: expected a whole number of tokens, got {_short(v)}"
                )
            counts[k] = int(v)
        out[st] = counts
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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


_READERS: dict[str, Callable[[Benchmark, list[Path], str], tuple[list[EpisodeResult], set[str]]]] = {
    "callnavi": _callnavi,
    "mobilitybench": _mobilitybench,
}


def rescore(opts: RescoreOptions, progress: Callable[[int, int], Any] | None = None) -> Path:
    """Score the prediction files and write a run folder; return its path."""
    if not opts.predictions:
        raise RescoreError("no prediction files given")
    if "mode" in opts.options:
        raise RescoreError("pass the metric mode as --mode, not -O mode=")
    options = {**opts.options, "mode": opts.mode}
    # raw_results.json is what upstream's Plan-and-Execute harness writes (planner, workers, reporter)
    if opts.benchmark == "mobilitybench" and options.setdefault("framework", "plan") != "plan":
        raise RescoreError(
            f"-O framework={options['framework']}: raw_results.json is written by the Plan-and-Execute "
            "harness; leave framework out (plan)"
        )
    if opts.benchmark == "mobilitybench" and opts.mode == "reference":
        # The reference's similarity is character Jaccard unless a model directory is named; loading the packaged
        # MiniLM only for the secondary paper table made a reference rescore about 10x slower. The paper table
        # names the similarity it used; -O similarity=minilm restores it.
        options.setdefault("similarity", "jaccard")
    try:
        bench = get_benchmark_class(opts.benchmark)(opts.data, options)
        results, found = _READERS[opts.benchmark](bench, opts.predictions, opts.mode)
    except DataError as e:
        raise RescoreError(str(e)) from None
    if not results:
        raise RescoreError(f"{', '.join(map(str, opts.predictions))}: no predictions")
    if len(found) > 1:  # one run is one model: repeats of two models would be read as one model's instability
        names = ", ".join(_short(m) for m in sorted(found)[:4]) + (", ..." if len(found) > 4 else "")
        raise RescoreError(
            f"{', '.join(p.name for p in opts.predictions)}: predictions of {len(found)} models ({names}); "
            "rescore each model's files separately"
        )
    label = opts.label or (found.pop() if found else "external")
    files = ", ".join(p.name for p in opts.predictions)
    spec = ModelSpec(
        name=label,
        base=label,
        engine=EXTERNAL,
        weights=Weights(file=files),
        quantization="unknown",
        context_length=1,
        description=f"predictions made outside rig, re-scored by rig rescore ({opts.mode} mode)",
    )
    repeats = max(r.repeat for r in results) + 1
    episodes = len({r.episode_id for r in results})
    info = BenchmarkInfo.of(bench, episodes)
    cfg = RunConfig(
        model=spec,
        benchmarks=[info],
        repeats=repeats,
        limit=None,
        decode="none",
        tool_mode="external",
        seed=0,
        temperature=0.0,
        max_tokens=0,
        gpu=None,
    )
    run_id = new_run_id(label, f"{bench.name}-rescore")
    run_dir = opts.out / run_id
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
    except (OSError, ValueError) as e:  # --out a file, unwritable, or a name the file system refuses
        why = getattr(e, "strerror", None) or e
        raise RescoreError(f"--out {opts.out}: cannot create the run folder {run_id} ({why})") from None
    manifest = RunManifest.begin(
        run_id,
        cfg,
        versions=package_versions(),
        engine_info={"rescored_from": [str(p) for p in opts.predictions], "mode": opts.mode},
    )
    manifest.write(run_dir)
    store = Store(run_dir / "results.sqlite")
    try:
        for i, r in enumerate(results, 1):
            store.write(r)
            if progress:
                progress(i, len(results))
    finally:
        store.close()
    manifest.status, manifest.finished_at = "finished", time.time()
    manifest.write(run_dir)
    return run_dir
