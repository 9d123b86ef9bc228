"""`rig selftest`: every benchmark's gold and anti-gold agents, in every mode the benchmark supports, through the
run's own path (``Engine.chat``, tool-mode parsers, agent loops, scorers), on the embedded data or ``--data``.

A metric is trusted when a correct agent reaches its maximum and a wrong one its minimum. The report says, per
benchmark x mode x metric, what gold and anti-gold reached, and names each episode where gold falls short and why:
a constraint that rejects the gold reply (which check: schema, llama.cpp, llguidance, xgrammar), the metric's own
definition (a documented cap, ``Benchmark.selftest_caps``), the data (``GoldUnavailable``), or the parser/scorer
(the episode's own failure reason). A benchmark without a gold agent is listed as "no gold".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig.agents.scripted import ScriptedEngine
from rig.benchmarks import benchmark_classes, get_benchmark_class
from rig.benchmarks.base import Benchmark, DataError, GoldUnavailable, MetricRole, RunContext, SelftestMode
from rig.decoding.accept import Acceptor
from rig.records import EpisodeResult, Sampling

Agent = Literal["gold", "anti-gold"]
# What a metric is expected to reach, per role and agent (None: not judged for that agent).
EXPECTED: dict[MetricRole, dict[Agent, float | None]] = {
    "score": {"gold": 1.0, "anti-gold": 0.0},
    "form": {"gold": 1.0, "anti-gold": None},
    "lower": {"gold": 0.0, "anti-gold": None},
}


class Shortfall(BaseModel):
    """One episode where an agent misses a metric's bound, and why."""

    agent: Agent
    episode: str
    metric: str
    value: float | None
    cause: Literal["constraint", "definition", "data", "scorer"]
    why: str


class MetricLine(BaseModel):
    metric: str
    role: MetricRole
    gold: float | None  # mean over the episodes that scored it; None: no episode did
    anti: float | None
    verdict: Literal["ok", "cap", "short", "anti above minimum"]
    cap: str = ""  # the documented reason when the verdict is cap


class ModeReport(BaseModel):
    mode: SelftestMode
    episodes: int
    played: int = 0  # episodes whose gold was played
    metrics: list[MetricLine] = Field(default_factory=list)
    shortfalls: list[Shortfall] = Field(default_factory=list)
    unavailable: list[str] = Field(default_factory=list)  # "episode: why" where no gold could be played
    notes: list[str] = Field(default_factory=list)  # what the data says about a gold that was played (file, field)
    crashed: list[str] = Field(default_factory=list)  # "episode: agent: exception" where run_episode raised
    error: str | None = None  # the mode could not run at all (bad data, a conflict)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.crashed and all(m.verdict in ("ok", "cap") for m in self.metrics)


class BenchmarkReport(BaseModel):
    name: str
    status: Literal["ran", "no gold", "error"]
    error: str | None = None
    modes: list[ModeReport] = Field(default_factory=list)


class SelftestReport(BaseModel):
    benchmarks: list[BenchmarkReport] = Field(default_factory=list)
    acceptors: list[str] = Field(default_factory=list)  # grammar engines every constrained reply was checked with
    missing_acceptors: list[str] = Field(default_factory=list)

    @property
    def ran(self) -> bool:
        return any(m.played for b in self.benchmarks for m in b.modes)

    @property
    def ok(self) -> bool:
        return self.ran and all(m.ok for b in self.benchmarks if b.status != "no gold" for m in b.modes)


class SelftestOptions(BaseModel):
    benchmarks: list[str] = Field(default_factory=list)  # empty: every benchmark
    data: Path | None = None
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)  # benchmark -> options, over each mode's own
    limit: int | None = Field(None, ge=1)  # the first N episodes of each mode (all when None)
    modes: list[str] = Field(default_factory=list)  # only the modes whose label contains one of these (all: empty)


def run_selftest(
    opts: SelftestOptions, acceptors: list[Acceptor], progress: Callable[[int, int], Any] | None = None
) -> SelftestReport:
    """Gold and anti-gold on every benchmark x mode. An unknown benchmark name is a KeyError listing the known
    ones, before anything runs; a mode whose data cannot be read is reported, and the others still run."""
    names = opts.benchmarks or list(benchmark_classes())
    classes = [get_benchmark_class(n) for n in names]
    report = SelftestReport(acceptors=[a.name for a in acceptors])
    plan: list[tuple[type[Benchmark], SelftestMode]] = []
    for cls in classes:
        if cls.gold is Benchmark.gold:
            report.benchmarks.append(BenchmarkReport(name=cls.name, status="no gold"))
            continue
        report.benchmarks.append(BenchmarkReport(name=cls.name, status="ran"))
        plan += [(cls, m) for m in cls.selftest_modes() if not opts.modes or any(x in m.label for x in opts.modes)]
    by_name = {b.name: b for b in report.benchmarks}
    for i, (cls, mode) in enumerate(plan):
        if progress is not None:
            progress(i, len(plan))
        by_name[cls.name].modes.append(asyncio.run(_mode(cls, mode, opts, acceptors)))
    if progress is not None:
        progress(len(plan), len(plan))
    return report


async def _mode(
    cls: type[Benchmark], mode: SelftestMode, opts: SelftestOptions, acceptors: list[Acceptor]
) -> ModeReport:
    options = {**mode.options, **opts.options.get(cls.name, {})}
    try:
        options = {**cls.implied_options(mode.decode), **options}
        bench = cls(opts.data, options)
        bench.strict_gold = False
        conflict = cls.conflicts(bench.opts, mode.decode, mode.tool_mode or "prompt")
        if conflict:
            return ModeReport(mode=mode, episodes=0, error=conflict)
        episodes = bench.episodes()
    except DataError as e:
        return ModeReport(mode=mode, episodes=0, error=str(e))
    episodes = episodes[: opts.limit] if opts.limit else episodes
    report = ModeReport(mode=mode, episodes=len(episodes))
    engine = ScriptedEngine(acceptors)
    ctx = RunContext(sampling=Sampling(), decode=mode.decode, tool_mode=mode.tool_mode or "prompt")
    results: dict[Agent, list[tuple[EpisodeResult, str | None]]] = {"gold": [], "anti-gold": []}
    try:
        await bench.setup()
    except DataError as e:
        report.error = str(e)
        return report
    try:
        for ep in episodes:
            for agent in ("gold", "anti-gold"):
                try:
                    player = bench.gold(ep, ctx) if agent == "gold" else bench.anti_gold(ep, ctx)
                except GoldUnavailable as e:
                    if agent == "gold":
                        report.unavailable.append(f"{ep.id}: {e}")
                    break
                except Exception as e:  # a plugin's agent that fails is its episode's line, never a traceback
                    report.unavailable.append(f"{ep.id}: {agent} agent failed: {type(e).__name__}: {e}")
                    break
                if player is None:
                    continue
                if agent == "gold":
                    report.played += 1
                    report.notes += [f"{ep.id}: {n}" for n in bench.gold_notes(ep)]
                engine.play(player)
                try:
                    res = await bench.run_episode(ep, engine, ctx, 0)
                except Exception as e:  # a plugin's episode that crashes is its line (and a failed self-test)
                    report.crashed.append(f"{ep.id}: {agent}: {type(e).__name__}: {e}")
                    break
                why = "; ".join(f"{r.check}: {r.why}" for r in engine.rejections) or None
                results[agent].append((res, why))
    finally:
        await bench.teardown()
    _judge(report, cls, bench.opts, results)
    return report


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _judge(
    report: ModeReport,
    cls: type[Benchmark],
    options: Any,
    results: dict[Agent, list[tuple[EpisodeResult, str | None]]],
) -> None:
    caps, maxima = cls.selftest_caps(options), cls.selftest_maxima(options)
    for metric, role in cls.selftest_metrics(options).items():
        scale = maxima.get(metric, 1.0)
        means: dict[Agent, float | None] = {}
        for agent, rows in results.items():
            expected = EXPECTED[role][agent]
            expected = None if expected is None else expected * scale
            values = [(r, rej, r.scores.get(metric)) for r, rej in rows]
            scored = [float(v) for _, _, v in values if v is not None]
            means[agent] = _mean(scored)
            if expected is None:
                continue
            for r, rejected, v in values:
                if v is None or abs(float(v) - expected) < 1e-9:
                    continue
                report.shortfalls.append(_shortfall(agent, r, metric, v, rejected, caps))
        gold, anti = means["gold"], means["anti-gold"]
        verdict: Literal["ok", "cap", "short", "anti above minimum"] = "ok"
        if gold is not None and abs(gold - EXPECTED[role]["gold"] * scale) > 1e-9:  # type: ignore[operator]
            verdict = "cap" if metric in caps and not _constrained(report, metric) else "short"
        anti_expected = EXPECTED[role]["anti-gold"]
        if verdict == "ok" and anti_expected is not None and anti is not None and abs(anti - anti_expected) > 1e-9:
            verdict = "cap" if metric in caps else "anti above minimum"  # a floor of the metric's own definition
        report.metrics.append(
            MetricLine(metric=metric, role=role, gold=gold, anti=anti, verdict=verdict, cap=caps.get(metric, ""))
        )


def _constrained(report: ModeReport, metric: str) -> bool:
    """Whether a constraint, not the metric's definition, cost gold part of this metric."""
    return any(s.metric == metric and s.agent == "gold" and s.cause == "constraint" for s in report.shortfalls)


def _shortfall(
    agent: Agent, r: EpisodeResult, metric: str, value: Any, rejected: str | None, caps: dict[str, str]
) -> Shortfall:
    if rejected is not None:
        cause: Literal["constraint", "definition", "data", "scorer"] = "constraint"
        why = rejected
    elif metric in caps:
        cause, why = "definition", caps[metric] + (f" ({r.error})" if r.error else "")
    else:
        cause, why = "scorer", r.error or "scored below the bound with no failure reason"
    return Shortfall(agent=agent, episode=r.episode_id, metric=metric, value=value, cause=cause, why=why)


def report_markdown(report: SelftestReport, max_lines: int = 20) -> str:
    """The report as markdown: a table per benchmark (mode, metric, gold, anti-gold, verdict), then the episodes
    where gold fell short (at most ``max_lines`` per mode), then the per-episode "gold unavailable" lines."""
    out = [
        "# rig selftest",
        "",
        f"Constrained replies checked with: {', '.join(['JSON schema', *report.acceptors])}"
        + (f" (not available: {'; '.join(report.missing_acceptors)})" if report.missing_acceptors else ""),
    ]
    for b in report.benchmarks:
        out += ["", f"## {b.name}", ""]
        if b.status != "ran":
            out.append(f"{b.status}" + (f": {b.error}" if b.error else ""))
            continue
        out += ["| mode | metric | gold | anti-gold | verdict |", "|---|---|---|---|---|"]
        caps: dict[str, str] = {}
        for m in b.modes:
            if m.error:
                out.append(f"| {m.mode.label} | - | - | - | not run: {m.error} |")
            for line in m.metrics:
                if line.verdict == "cap":
                    caps[line.metric] = line.cap
                out.append(
                    f"| {m.mode.label} | {line.metric} | {_num(line.gold)} | {_num(line.anti)} | {line.verdict} |"
                )
        if caps:
            out += ["", "Caps (the metric's own definition):"]
            out += [f"- {metric}: {why}" for metric, why in caps.items()]
        for m in b.modes:
            gold_short = [s for s in m.shortfalls if s.agent == "gold"]
            anti_high = [s for s in m.shortfalls if s.agent == "anti-gold"]
            for title, rows in (("gold falls short", gold_short), ("anti-gold above its minimum", anti_high)):
                if not rows:
                    continue
                out += ["", f"{m.mode.label}: {title} on {len({s.episode for s in rows})} episode(s):"]
                out += [f"- {s.episode} {s.metric}={_num(s.value)} ({s.cause}): {s.why}" for s in rows[:max_lines]]
                if len(rows) > max_lines:
                    out.append(f"- ... {len(rows) - max_lines} more")
            for title, lines in (
                ("gold unavailable", m.unavailable),
                ("data notes", m.notes),
                ("run_episode crashed", m.crashed),
            ):
                if lines:
                    out += ["", f"{m.mode.label}: {title} on {len(lines)} episode(s):"]
                    out += [f"- {u}" for u in lines[:max_lines]]
                    if len(lines) > max_lines:
                        out.append(f"- ... {len(lines) - max_lines} more")
    return "\n".join(out) + "\n"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"
