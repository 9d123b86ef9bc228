"""rig runs as Inspect eval logs: one log per benchmark of a run, which inspect_ai's reader reads and `inspect view`
shows (`rig export RUN --format inspect`).

Built with inspect_ai's own pydantic types and written by its own writer, so the file is the format its reader
accepts. A sample is an episode (repeat r is epoch r + 1): its input is the episode's prompt messages, rebuilt from
the recorded data (results do not store prompts; when the data is gone, or its hash is no longer the run's, the input
says so instead), then per model turn the assistant message with its tool calls and a tool message with each call's
answer or error; the output is the last turn, scores are the episode's scores under the benchmark's own metric names
plus the headline, token usage and timings are the stored ones, a failed episode's error is the sample's error. The
eval records the model, the dataset and the run's settings; its results hold the headline with its CI from the run's
`RunSummary`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rig.benchmarks import get_benchmark_class, rebuilt_episodes
from rig.records import Episode, EpisodeResult, Generation, Message, ToolCall, atomic_path
from rig.runfolder.config import BenchmarkInfo, RunConfig
from rig.runfolder.folder import RunFolder

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageTool,
        GenerateConfig,
        ModelUsage,
        StopReason,
    )

# rig's finish reasons in Inspect's words (anything else: "unknown")
STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "max_tokens",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


class InspectUnavailable(RuntimeError):
    """inspect_ai is not installed (the `inspect` extra)."""


class InspectExportError(ValueError):
    """A run that cannot become Inspect logs as it is (a damaged manifest, a benchmark not installed, an output
    folder that is a link); str() names the file and field."""


def _time(t: float | None) -> datetime | None:
    """A stored time (seconds since 1970) as a UTC datetime; None when it is none or none a calendar holds (1e20)."""
    if t is None:
        return None
    try:
        return datetime.fromtimestamp(t, tz=timezone.utc)
    except (OverflowError, ValueError, OSError):
        return None


def _iso(t: float | None) -> str | None:
    when = _time(t)
    return None if when is None else when.isoformat()


def _json(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def _input(episode: Episode | None, why: str | None) -> list[ChatMessage]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser

    if episode is None:
        return [ChatMessageUser(content=f"(prompt unavailable: {why or 'the episode is not in the data'})")]

    def one(m: Message) -> ChatMessage:
        if m.role == "system":
            return ChatMessageSystem(content=m.content)
        if m.role == "assistant":
            return ChatMessageAssistant(content=m.content)
        if m.role == "tool":
            return ChatMessageTool(content=m.content, tool_call_id=m.tool_call_id, function=m.name)
        return ChatMessageUser(content=m.content)

    return [one(m) for m in episode.messages]


def _usage(gens: Iterable[Generation]) -> ModelUsage | None:
    from inspect_ai.model import ModelUsage

    gens = list(gens)
    prompt = [g.prompt_tokens for g in gens if g.prompt_tokens is not None]
    completion = [g.completion_tokens for g in gens if g.completion_tokens is not None]
    if not prompt and not completion:
        return None
    cached = [g.cached_prompt_tokens for g in gens if g.cached_prompt_tokens is not None]
    return ModelUsage(
        input_tokens=sum(prompt),
        output_tokens=sum(completion),
        total_tokens=sum(prompt) + sum(completion),
        input_tokens_cache_read=sum(cached) if cached else None,
    )


def _by_step(r: EpisodeResult) -> dict[int, list[tuple[int, ToolCall]]]:
    """The executed calls (with their place among the episode's calls) of each turn; a call without a step, or with
    one past the last turn, follows the last turn."""
    by_step: dict[int, list[tuple[int, ToolCall]]] = {}
    last = max(len(r.generations) - 1, 0)
    for j, c in enumerate(r.tool_calls):
        step = c.step if c.step is not None and c.step <= last else last
        by_step.setdefault(step, []).append((j, c))
    return by_step


def _reply(i: int, g: Generation, executed: list[tuple[int, ToolCall]], model: str) -> ChatMessageAssistant:
    """Turn ``i`` as an assistant message: the calls the tools executed, else those read from the reply that no
    tool executed (a single-turn answer)."""
    from inspect_ai.model import ChatMessageAssistant
    from inspect_ai.tool import ToolCall as InspectCall

    calls = [
        InspectCall(id=f"call-{i}-{j}", function=c.name, arguments=c.arguments, parse_error=_invalid(c))
        for j, c in executed
    ]
    if not executed and g.tool_calls:
        calls = [
            InspectCall(id=f"call-{i}-p{k}", function=c.name, arguments=c.arguments) for k, c in enumerate(g.tool_calls)
        ]
    meta = {"finish_reason": g.finish_reason, "parse_status": g.parse_status}
    if g.error:
        meta["error"] = g.error
    return ChatMessageAssistant(content=g.text, tool_calls=calls or None, model=model, metadata=meta)


def _model_event(
    g: Generation, reply: ChatMessageAssistant, seen: list[ChatMessage], model: str, config: GenerateConfig
) -> Any:
    from inspect_ai.model import ChatCompletionChoice, ModelOutput

    stop = STOP_REASONS.get(g.finish_reason or "", "unknown")
    turn = ModelOutput(
        model=model,
        choices=[ChatCompletionChoice(message=reply, stop_reason=stop)],
        usage=_usage([g]),
        time=g.timings.e2e_s,
        error=g.error,
    )
    return dict(model=model, input=seen, tools=[], tool_choice="auto", config=config, output=turn, error=g.error)


def _answer(call_id: str, c: ToolCall) -> tuple[ChatMessageTool, dict[str, Any]]:
    """A call's answer (or error) as a tool message, and the fields of its tool event."""
    from inspect_ai.model import ChatMessageTool
    from inspect_ai.tool import ToolCallError

    error = None
    if c.error is not None or c.verdict == "invalid":
        parsing = c.error_category in ("invalid_arguments", "unknown_tool")
        error = ToolCallError(
            "parsing" if parsing else "unknown", f"{c.error_category or 'error'}: {c.error or 'invalid call'}"
        )
    content = _json(c.answer) if c.error is None else (c.error or "")
    meta = c.meta or None
    message = ChatMessageTool(content=content, tool_call_id=call_id, function=c.name, error=error, metadata=meta)
    event = dict(id=call_id, function=c.name, arguments=c.arguments, result=content, error=error, metadata=meta)
    return message, event


def _turns(
    r: EpisodeResult, model: str, inputs: list[ChatMessage], config: GenerateConfig
) -> tuple[list[ChatMessage], list[Any]]:
    """Each model turn as an assistant message with its tool calls, then each call's answer as a tool message; and
    the same as Inspect events (a model event per turn with the conversation it saw, a tool event per call), which
    is what `inspect view` draws the conversation from. Calls are matched to the turn that made them (their step)."""
    from inspect_ai.event import ModelEvent, ToolEvent

    by_step = _by_step(r)
    when = datetime.fromtimestamp(r.started_at or 0.0, tz=timezone.utc)
    out: list[ChatMessage] = []
    events: list[Any] = []
    clock = 0.0
    for i, g in enumerate(r.generations or [Generation(request_hash="")]):
        executed = by_step.get(i, [])
        reply = _reply(i, g, executed, model)
        seen = [*inputs, *out]
        out.append(reply)
        fields = _model_event(g, reply, seen, model, config)
        events.append(ModelEvent(**fields, timestamp=when, working_start=clock, working_time=g.timings.e2e_s))
        clock += g.timings.e2e_s or 0.0
        for j, c in executed:
            message, tool = _answer(f"call-{i}-{j}", c)
            out.append(message)
            events.append(ToolEvent(**tool, timestamp=when, working_start=clock))
    return out, events


def _invalid(c: ToolCall) -> str | None:
    return f"{c.error_category or 'invalid'}: {c.error or 'invalid call'}" if c.verdict == "invalid" else None


def _sample(
    r: EpisodeResult,
    episode: Episode | None,
    why: str | None,
    model: str,
    headline: float | None,
    config: GenerateConfig,
) -> EvalSample:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput
    from inspect_ai.scorer import Score

    inputs = _input(episode, why)
    turns, events = _turns(r, model, inputs, config)
    final = ChatMessageAssistant(content="")
    for m in turns:
        if isinstance(m, ChatMessageAssistant):
            final = m
    last_gen = r.generations[-1] if r.generations else None
    usage = _usage(r.generations)
    e2e = [g.timings.e2e_s for g in r.generations if g.timings.e2e_s is not None]
    output = ModelOutput(
        model=model,
        choices=[
            ChatCompletionChoice(
                message=final,
                stop_reason=STOP_REASONS.get(last_gen.finish_reason or "", "unknown") if last_gen else "unknown",
            )
        ],
        usage=usage,
        time=sum(e2e) if e2e else None,
        error=r.error if r.status == "failed" else None,
    )
    scores = {k: Score(value=v) for k, v in r.scores.items() if v is not None and math.isfinite(v)}
    if headline is not None:
        scores["headline"] = Score(value=headline, answer=_json(r.output) if r.output is not None else None)
    total = r.finished_at - r.started_at if r.started_at is not None and r.finished_at is not None else None
    metadata: dict[str, Any] = {"tags": r.tags, "status": r.status}
    if r.error_category:
        metadata["error_category"] = r.error_category
    if r.output is not None:
        metadata["output"] = r.output
    if r.energy is not None:
        metadata["energy"] = r.energy.model_dump(mode="json", exclude_none=True)
    return EvalSample(
        id=r.episode_id,
        epoch=r.repeat + 1,
        input=inputs,
        target=_json(episode.ground_truth) if episode is not None and episode.ground_truth is not None else "",
        messages=[*inputs, *turns],
        events=events,
        output=output,
        scores=scores or None,
        metadata=metadata,
        model_usage={model: usage} if usage else {},
        started_at=_iso(r.started_at),
        completed_at=_iso(r.finished_at),
        total_time=total,
        working_time=sum(e2e) if e2e else None,
        error=EvalError(message=r.error or r.error_category or "failed", traceback="", traceback_ansi="")
        if r.status == "failed"
        else None,
    )


def _generate_config(cfg: RunConfig) -> GenerateConfig:
    from inspect_ai.model import GenerateConfig

    sampling = cfg.model.sampling
    return GenerateConfig(
        temperature=cfg.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        max_tokens=cfg.max_tokens,
        seed=cfg.seed,
        stop_seqs=sampling.stop or None,
    )


def _eval_spec(
    folder: RunFolder, info: BenchmarkInfo, eval_id: str, generate: GenerateConfig, sample_ids: list[str]
) -> Any:
    """The eval: the model, the dataset and the run's settings."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalRevision, EvalSpec

    man, cfg = folder.manifest, folder.manifest.config
    spec = man.run_spec()
    return EvalSpec(
        eval_id=eval_id,
        run_id=man.run_id,
        created=_iso(man.started_at) or "",
        task=info.name,
        task_id=eval_id,
        task_version=info.version,
        task_args=info.options,
        dataset=EvalDataset(
            name=info.name,
            location=info.data_path,
            samples=info.episodes,
            sample_ids=sample_ids,
            shuffled=spec.order == "shuffled",
        ),
        model=f"rig/{cfg.model.name}",
        model_generate_config=generate,
        model_args={
            "engine": cfg.model.engine,
            "quantization": cfg.model.quantization,
            "context_length": cfg.model.context_length,
            **({"engine_args": cfg.model.engine_args} if cfg.model.engine_args else {}),
        },
        config=EvalConfig(limit=spec.limit, epochs=cfg.repeats),
        revision=EvalRevision(type="git", origin="rig", commit=man.git_revision) if man.git_revision else None,
        packages={"rig": man.rig_version, **man.versions},
        metadata={
            "rig_run_id": man.run_id,
            "run_spec": spec.model_dump(mode="json", exclude_none=True),
            "decode": cfg.decode,
            "tool_mode": cfg.tool_mode,
            "data_hash": info.data_hash,
            "headline": get_benchmark_class(info.name).headline_name,
            "host": man.host.model_dump(mode="json"),
            "bundle_id": man.bundle_id,
        },
    )


def _results(folder: RunFolder, info: BenchmarkInfo, completed: int) -> Any:
    """The results: the RunSummary's headline with its CI (none when there is no mean)."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    h = folder.summary(info.name).headline
    metrics: dict[str, EvalMetric] = {}
    if h is not None and h.mean is not None:
        metrics = {
            "mean": EvalMetric(name="mean", value=h.mean),
            "ci_low": EvalMetric(name="ci_low", value=h.low if h.low is not None else h.mean),
            "ci_high": EvalMetric(name="ci_high", value=h.high if h.high is not None else h.mean),
        }
    what = get_benchmark_class(info.name).headline_name
    return EvalResults(
        total_samples=info.episodes * folder.manifest.config.repeats,
        completed_samples=completed,
        scores=[EvalScore(name="headline", scorer=info.name, metrics=metrics, metadata={"what": what})],
    )


def eval_log(folder: RunFolder, benchmark: str) -> EvalLog:
    """One benchmark of a run as an Inspect `EvalLog`, from the folder's results and its `RunSummary`."""
    try:
        from inspect_ai.log import EvalLog, EvalPlan, EvalPlanStep, EvalStats
    except ImportError:
        raise InspectUnavailable("--format inspect needs inspect_ai: pip install 'rig[inspect]'") from None

    man = folder.manifest
    info = folder.benchmark(benchmark)
    cfg = man.config
    model = cfg.model.name
    summary = folder.summary(benchmark)
    results = folder.results(benchmark)
    episodes, why = rebuilt_episodes(info)  # none when the data changed: a log never shows prompts not sent
    headlines = summary.headline.by_episode() if summary.headline else {}
    generate = _generate_config(cfg)
    samples = [
        _sample(r, episodes.get(r.episode_id), why, model, headlines.get((r.episode_id, r.repeat)), generate)
        for r in results
    ]
    eval_id = hashlib.sha256(f"{man.run_id}/{benchmark}".encode()).hexdigest()[:22]
    finished = man.status == "finished" and len(results) >= info.episodes * cfg.repeats
    status: Literal["started", "success", "cancelled", "error"] = "success"
    if not finished:
        status = "error" if man.status == "failed" else "cancelled" if man.status == "interrupted" else "started"
    usage = _usage(g for r in results for g in r.generations)
    return EvalLog(
        status=status,
        eval=_eval_spec(folder, info, eval_id, generate, list(dict.fromkeys(r.episode_id for r in results))),
        plan=EvalPlan(
            name="rig",
            steps=[EvalPlanStep(solver=f"rig {benchmark}", params={"decode": cfg.decode, "tool_mode": cfg.tool_mode})],
            config=generate,
        ),
        results=_results(folder, info, len(results)),
        stats=EvalStats(
            started_at=_iso(man.started_at) or "",
            completed_at=_iso(man.finished_at) or "",
            model_usage={f"rig/{model}": usage} if usage else {},
        ),
        samples=samples,
    )


def log_name(folder: RunFolder, benchmark: str) -> str:
    """The file name Inspect's own logs use: the start time, the task and an id (`inspect view` lists these)."""
    when = _time(folder.manifest.started_at)
    if when is None:
        raise InspectExportError(
            f"{folder.path / 'manifest.json'}: started_at: {folder.manifest.started_at!r} is not a time (seconds "
            "since 1970, before the year 10000); the manifest is damaged"
        )
    stamp = when.strftime("%Y-%m-%dT%H-%M-%S+00-00")
    digest = hashlib.sha256(f"{folder.manifest.run_id}/{benchmark}".encode()).hexdigest()[:22]
    return f"{stamp}_{benchmark}_{digest}.eval"


def write_inspect_logs(run_dir: Path, out: Path | None = None) -> list[Path]:
    """One Inspect log per benchmark of the run in ``out`` (default: the run folder's inspect/), each written whole
    under a temporary name first; returns the files."""
    from inspect_ai.log import write_eval_log

    from rig.benchmarks import benchmark_names

    folder = RunFolder(run_dir)
    for i, b in enumerate(folder.benchmarks):  # every refusal before anything is written
        if b.name not in benchmark_names():
            raise InspectExportError(
                f"{folder.path / 'manifest.json'}: config.benchmarks[{i}].name: benchmark {b.name!r} is not "
                "installed here (`rig benchmarks` lists those that are), so its logs cannot be built"
            )
        log_name(folder, b.name)
    if out is None:
        out = folder.path / "inspect"
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise InspectExportError(
                f"{out}: is {'a symbolic link' if out.is_symlink() else 'not a folder'}; the logs are written only "
                "inside the run folder: remove it, or give the folder they go to with --out"
            )
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for b in folder.benchmarks:
        path = out / log_name(folder, b.name)
        log = eval_log(folder, b.name)
        with atomic_path(path) as tmp:
            write_eval_log(log, str(tmp), format="eval")
        paths.append(path)
    return paths
