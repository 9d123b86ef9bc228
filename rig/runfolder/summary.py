"""One summary of a run's latency, tokens, cut replies, memory and headline score, computed in one place.

The markdown report, the HTML report and `rig compare` all render a `RunSummary`, so a measure added here (as
"replies cut at max_tokens" once was) reaches every report. A value that was not measured is None, never 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from statistics import median
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from rig.benchmarks import get_benchmark_class, recorded_options
from rig.records import CALL_FORMS, EpisodeResult
from rig.runfolder.config import BenchmarkInfo
from rig.runfolder.manifest import RunManifest
from rig.runfolder.spec import pass_ks
from rig.scoring.reliability import episode_counts, estimate, per_episode
from rig.scoring.stats import mean_ci, percentile, ratio_ci
from rig.scoring.taxonomy import FailureClass
from rig.telemetry.energy import processed_tokens
from rig.telemetry.mbu import Efficiency, GenerationCost, efficiency
from rig.telemetry.peak import describe, peak_doubts

if TYPE_CHECKING:
    from rig.benchmarks.base import Benchmark, ReferenceCalls

EpisodeHeadline = Callable[[EpisodeResult], "float | None"]  # a benchmark's headline score of one episode


class EpisodeScore(BaseModel):
    episode_id: str
    repeat: int
    score: float


class HeadlineScore(BaseModel):
    """The benchmark's headline per-episode score: its mean with a 95% bootstrap CI."""

    samples: int
    mean: float | None = None  # None below two samples: there is no interval to give
    low: float | None = None
    high: float | None = None
    scores: list[EpisodeScore] = Field(default_factory=list)  # one per scored (episode, repeat), for paired comparisons
    source: str | None = None  # who gave the numbers when it matters (a judge: "judge: X, self-judged"), else None

    def by_episode(self) -> dict[tuple[str, int], float]:
        return {(s.episode_id, s.repeat): s.score for s in self.scores}


class EnergySummary(BaseModel):
    """Joules per episode and per correct episode (net of idle); None with ``reason`` when not measured."""

    episodes: int = 0  # episodes with a measured energy
    total_j: float | None = None
    per_episode_j: float | None = None
    per_correct_j: float | None = None  # total over the sum of the headline scores of the same episodes
    per_correct_low: float | None = None
    per_correct_high: float | None = None
    per_token_j: float | None = None  # over the tokens processed (uncached prompt + completion)
    attribution: str | None = None  # exclusive / token-share / time-share, or several joined
    source: str | None = None  # "nvml: <device>" / "rapl: <zones>"
    resolution_j: float | None = None
    reason: str | None = None


NOT_RECORDED = "not recorded"  # a call read before rig recorded its form
NO_CALL = "no call read"


class CallForms(BaseModel):
    """How the model wrote the calls rig read (``Generation.call_form``), per form, and the episodes that had a call
    read in a form the benchmark's reference harness does not read (``Benchmark.reference_calls``)."""

    generations: dict[str, int] = Field(default_factory=dict)  # per form, NOT_RECORDED and NO_CALL included
    episodes: dict[str, int] = Field(default_factory=dict)  # episodes with at least one generation in the form
    reference: list[str] = Field(default_factory=list)  # the forms the reference harness reads
    reference_note: str = ""  # where that is said
    rig_only_episodes: int = 0  # episodes with a call read in a form the reference does not read
    rig_only_headline: float | None = None  # their headline scores' share of the headline mean (sum over samples)

    @property
    def rig_only(self) -> list[str]:
        return [f for f in self.generations if f in CALL_FORMS and f not in self.reference]


def call_forms(
    results: list[EpisodeResult], reference: ReferenceCalls, headline: EpisodeHeadline | None
) -> CallForms | None:
    """The forms of the calls read in ``results``; None when no generation was read for a call (a benchmark
    without tool calls, or only engine errors)."""
    out = CallForms(reference=list(reference.forms), reference_note=reference.note)
    only_rig: list[EpisodeResult] = []
    for r in results:
        forms = set()
        for g in r.generations:
            form = g.call_form or (NOT_RECORDED if g.tool_calls else None)
            if form is None and g.parse_status in ("no_call", "parse_error"):
                form = NO_CALL
            if form is not None:
                out.generations[form] = out.generations.get(form, 0) + 1
                forms.add(form)
        for form in forms:
            out.episodes[form] = out.episodes.get(form, 0) + 1
        if any(f in CALL_FORMS and f not in reference.forms for f in forms):
            only_rig.append(r)
    # A run stored before rig recorded the forms has no `call_form` in its rows: nothing to count, nothing shown
    recorded = any("call_form" in g.model_fields_set for r in results for g in r.generations)
    if not out.generations or not recorded:
        return None
    out.rig_only_episodes = len(only_rig)
    if headline is not None:
        scored = [v for r in results if (v := headline(r)) is not None]
        mine = [v for r in only_rig if (v := headline(r)) is not None]
        out.rig_only_headline = sum(mine) / len(scored) if scored else None
    return out


class PassK(BaseModel):
    """pass^k and pass@k at one k, each the mean over episodes with a 95% bootstrap CI over episodes."""

    k: int
    episodes: int  # episodes with at least k scored trials (the others are left out)
    pass_hat: float
    pass_hat_low: float
    pass_hat_high: float
    pass_at: float
    pass_at_low: float
    pass_at_high: float


class Reliability(BaseModel):
    """Success over the repeats of each episode: pass^k (every one of k trials succeeds) and pass@k (at least one),
    at the k asked for. ``rows`` holds the k measured; ``reason`` says why the others (or all) are not measured,
    never a 0 in their place."""

    repeats: int  # trials per episode the run was planned with (n)
    ks: list[int]  # the k asked for (--pass-k, else 1, 3, 5 and n up to n)
    success: str  # what counts as a success: the benchmark's rule from its headline
    # the temperature the repeats sampled at (the benchmark's own where its options fix one); None: older summary
    temperature: float | None = None
    rows: list[PassK] = Field(default_factory=list)
    reason: str | None = None
    counts: dict[str, tuple[int, int]] = Field(default_factory=dict)  # episode -> (trials, successes)


class Failure(BaseModel):
    """One (episode, repeat) that did not succeed: its primary class of the shared taxonomy and its benchmark's own
    reason (the detail). ``mapped`` False: the benchmark does not map that reason, so the class is "other"."""

    episode_id: str
    repeat: int
    primary: FailureClass
    detail: str
    mapped: bool = True


class Failures(BaseModel):
    """The failure taxonomy of a run's episodes of one benchmark (rig/scoring/taxonomy.py)."""

    trials: int  # (episode, repeat) results classified or found a success
    failures: list[Failure] = Field(default_factory=list)

    def classes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.failures:
            out[f.primary] = out.get(f.primary, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def details(self, primary: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.failures:
            if f.primary == primary:
                out[f.detail] = out.get(f.detail, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def unmapped(self) -> list[str]:
        return sorted({f.detail for f in self.failures if not f.mapped})

    def states(self) -> dict[tuple[str, int], str]:
        """(episode, repeat) -> the primary class of each failure; a stored result absent here succeeded."""
        return {(f.episode_id, f.repeat): f.primary for f in self.failures}


class RunSummary(BaseModel):
    """A run's measures over the results of one benchmark (or of all its benchmarks: `benchmark` None)."""

    run_id: str
    model: str
    quantization: str
    benchmark: str | None
    expected_episodes: int  # episodes x repeats the run was planned with
    episodes: int
    failed: int
    generations: int
    e2e_p50_s: float | None
    e2e_p95_s: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    decode_tps_median: float | None
    prompt_tokens_mean: float | None
    prompt_tokens_total: int | None
    completion_tokens_mean: float | None
    completion_tokens_total: int | None
    finish_reasons: int  # generations whose engine reported why they stopped
    cut_replies: int | None  # of those, stopped at max_tokens ('length'); None when no engine reported any
    load_time_s: float | None
    peak_rss_bytes: int | None
    gpu_load_bytes: int | None  # device memory after load, over the baseline before it
    gpu_peak_bytes: int | None
    gpu_unavailable: str | None  # why GPU memory was not measured; None when it was
    headline: HeadlineScore | None  # None when summarised without the benchmark's headline score
    energy: EnergySummary = Field(default_factory=lambda: EnergySummary(reason="not summarised"))
    efficiency: Efficiency = Field(default_factory=lambda: Efficiency(mbu_reason="not summarised"))
    call_forms: CallForms | None = None  # None: no call was read (or summarised over all benchmarks)
    reliability: Reliability | None = None  # None: summarised over all benchmarks
    failures: Failures | None = None  # None: summarised over all benchmarks

    @property
    def cut_share(self) -> float | None:
        return None if self.cut_replies is None else self.cut_replies / self.finish_reasons


def total(values: Iterable[float | None]) -> float | None:
    """Sum of the measured values; None, not 0, when none was measured."""
    measured = [v for v in values if v is not None]
    return sum(measured) if measured else None


def summarize(
    manifest: RunManifest,
    results: list[EpisodeResult],
    benchmark: BenchmarkInfo | None = None,
    headline: EpisodeHeadline | None = None,
) -> RunSummary:
    """Summarise `results` of one benchmark of the run (`benchmark`), or of all of them (None)."""
    cfg = manifest.config
    infos = [benchmark] if benchmark else cfg.benchmarks
    gens = [g for r in results for g in r.generations]
    e2e = [g.timings.e2e_s for g in gens if g.timings.e2e_s is not None]
    ttft = [g.timings.ttft_s for g in gens if g.timings.ttft_s is not None]
    tps = [g.timings.decode_tps for g in gens if g.timings.decode_tps is not None]
    pt = [g.prompt_tokens for g in gens if g.prompt_tokens is not None]
    ct = [g.completion_tokens for g in gens if g.completion_tokens is not None]
    finished = [g.finish_reason for g in gens if g.finish_reason is not None]
    gpu = manifest.gpu_memory
    measured_gpu = gpu if gpu is not None and gpu.available else None
    if measured_gpu:
        gpu_unavailable = None
    else:
        gpu_unavailable = (gpu.reason or "no reason recorded") if gpu else "no GPU record"
    return RunSummary(
        run_id=manifest.run_id,
        model=cfg.model.name,
        quantization=cfg.model.quantization,
        benchmark=benchmark.name if benchmark else None,
        expected_episodes=sum(b.episodes for b in infos) * cfg.repeats,
        episodes=len(results),
        failed=sum(r.status == "failed" for r in results),
        generations=len(gens),
        e2e_p50_s=percentile(e2e, 50),
        e2e_p95_s=percentile(e2e, 95),
        ttft_p50_s=percentile(ttft, 50),
        ttft_p95_s=percentile(ttft, 95),
        decode_tps_median=median(tps) if tps else None,
        prompt_tokens_mean=sum(pt) / len(pt) if pt else None,
        prompt_tokens_total=sum(pt) if pt else None,
        completion_tokens_mean=sum(ct) / len(ct) if ct else None,
        completion_tokens_total=sum(ct) if ct else None,
        finish_reasons=len(finished),
        cut_replies=finished.count("length") if finished else None,
        load_time_s=manifest.load_time_s,
        # A live process or device never uses 0 bytes at its peak: 0 can only be a missing reading.
        peak_rss_bytes=manifest.peak_rss_bytes or None,
        gpu_load_bytes=measured_gpu.load_bytes if measured_gpu else None,
        gpu_peak_bytes=(measured_gpu.peak_bytes or None) if measured_gpu else None,
        gpu_unavailable=gpu_unavailable,
        headline=_headline(results, benchmark, headline) if headline else None,
        energy=energy_summary(manifest, results, headline),
        efficiency=run_efficiency(manifest, results),
        call_forms=_call_forms(results, benchmark, headline),
        reliability=reliability(manifest, results, benchmark) if benchmark else None,
        failures=failures(results, benchmark_of(benchmark)) if benchmark else None,
    )


def reliability(manifest: RunManifest, results: list[EpisodeResult], info: BenchmarkInfo) -> Reliability:
    """pass^k and pass@k of one benchmark's results, or why not: results stored before rig recorded each repeat's
    seed, or repeats identical by construction (temperature 0, as the benchmark sampled) beyond k = 1."""
    cfg = manifest.config
    bench = benchmark_of(info)
    temperature = bench.temperature(recorded_options(info), cfg.temperature)
    out = Reliability(
        repeats=cfg.repeats,
        ks=pass_ks(manifest.spec.pass_k if manifest.spec else None, cfg.repeats),
        success=bench.success_note,
        temperature=temperature,
    )
    trials = [(r.episode_id, ok) for r in results if (ok := bench.success(r)) is not None]
    if any(r.seed is None for r in results):
        out.reason = (
            "pass^k: not measured: results stored without their repeat's seed (before rig recorded it, or re-scored)"
        )
        return out
    if not trials:
        out.reason = "pass^k: not measured: no episode has a headline score"
        return out
    out.counts = episode_counts(trials)
    ks = out.ks
    if temperature == 0 and cfg.repeats > 1:
        ks = [k for k in ks if k == 1]
        out.reason = (
            f"pass^k for k > 1: not measured: at temperature 0 the {cfg.repeats} repeats are identical by construction"
        )
    for k in ks:
        hat = list(per_episode(out.counts, k, "pass^k").values())
        at = list(per_episode(out.counts, k, "pass@k").values())
        if not hat:
            out.reason = (
                out.reason + "; " if out.reason else ""
            ) + f"pass^{k}: not measured: no episode has {k} scored trials"
            continue
        out.rows.append(PassK(k=k, episodes=len(hat), **_ci("pass_hat", hat), **_ci("pass_at", at)))
    return out


def _ci(name: str, values: list[float]) -> dict[str, float]:
    mean, low, high = estimate(values)
    return {name: mean, f"{name}_low": low, f"{name}_high": high}


def failures(results: list[EpisodeResult], bench: type[Benchmark]) -> Failures:
    """Each result that is not a success, with its one primary class and its benchmark's reason."""
    out = Failures(trials=len(results))
    for r in results:
        if bench.success(r) is True:
            continue
        primary, detail, mapped = bench.failure_class(r)
        out.failures.append(
            Failure(episode_id=r.episode_id, repeat=r.repeat, primary=primary, detail=detail, mapped=mapped)
        )
    return out


def energy_summary(
    manifest: RunManifest, results: list[EpisodeResult], headline: EpisodeHeadline | None
) -> EnergySummary:
    run = manifest.energy
    out = EnergySummary(
        source=f"{run.source}: {run.detail}" if run and run.source else None,
        resolution_j=run.resolution_j if run else None,
    )
    measured = [r for r in results if r.energy is not None and r.energy.joules is not None]
    if not measured:
        if run is None:
            out.reason = "recorded before rig measured energy"
        elif run.reason:
            out.reason = run.reason
        else:
            why = {r.energy.reason for r in results if r.energy is not None and r.energy.reason}
            out.reason = "; ".join(sorted(why)) or "no episode was measured"
        return out
    joules = [r.energy.joules or 0.0 for r in measured if r.energy is not None]
    out.episodes = len(measured)
    out.total_j = sum(joules)
    out.per_episode_j = out.total_j / len(measured)
    tokens = [processed for r in measured for g in r.generations if (processed := processed_tokens(g)) is not None]
    if tokens and sum(tokens) > 0 and len(tokens) == sum(len(r.generations) for r in measured):
        out.per_token_j = out.total_j / sum(tokens)
    kinds = sorted({r.energy.attribution for r in measured if r.energy is not None and r.energy.attribution})
    out.attribution = ", ".join(kinds) or None
    if len(measured) < len(results):
        out.reason = f"{len(results) - len(measured)} of {len(results)} episodes not measured"
    if headline is not None:
        pairs = [
            (r.energy.joules or 0.0, v) for r in measured if r.energy is not None and (v := headline(r)) is not None
        ]
        ci = ratio_ci([j for j, _ in pairs], [v for _, v in pairs]) if pairs else None
        if ci is not None:
            out.per_correct_j, out.per_correct_low, out.per_correct_high = ci
    return out


def run_efficiency(manifest: RunManifest, results: list[EpisodeResult]) -> Efficiency:
    gens = [
        GenerationCost(
            prompt_tokens=g.prompt_tokens,
            cached_prompt_tokens=g.cached_prompt_tokens,
            completion_tokens=g.completion_tokens,
            decode_tps=g.timings.decode_tps,
            prefill_s=g.timings.prefill_s or g.timings.ttft_s,  # llama.cpp reports time to first token only
        )
        for r in results
        for g in r.generations
    ]
    probe = manifest.bandwidth
    source, doubts = None, None
    if probe is None:
        peak_reason = manifest.bandwidth_reason or "recorded before rig measured MBU"
    else:
        peak_reason = None
        source = describe(probe)
        if probe.nvml_bytes_per_s:
            source += f"; NVML's data sheet: {probe.nvml_bytes_per_s / 1e9:.0f} GB/s"
        # old or another rig's as of the run, not of the reading
        doubts = peak_doubts(probe, at=manifest.started_at, version=manifest.rig_version)
    profile_reason = manifest.weights_reason
    if manifest.weights_profile is None and profile_reason is None:
        profile_reason = "recorded before rig measured MBU"
    return efficiency(
        gens,
        manifest.weights_profile,
        profile_reason,
        probe.bytes_per_s if probe else None,
        probe.flops_per_s if probe else None,
        peak_reason,
        nvml_bps=probe.nvml_bytes_per_s if probe else None,
        overlapping=_overlapping(results),
        peak_source=source,
        peak_doubts=doubts,
    )


def _call_forms(
    results: list[EpisodeResult], info: BenchmarkInfo | None, headline: EpisodeHeadline | None
) -> CallForms | None:
    if info is None:
        return None
    return call_forms(results, benchmark_of(info).reference_calls(recorded_options(info)), headline)


def _overlapping(results: list[EpisodeResult]) -> bool:
    spans = sorted((r.started_at, r.finished_at) for r in results if r.started_at and r.finished_at)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


def _headline(results: list[EpisodeResult], info: BenchmarkInfo | None, headline: EpisodeHeadline) -> HeadlineScore:
    h = headline_score(results, headline)
    if info is not None:
        h.source = get_benchmark_class(info.name).headline_source(results, recorded_options(info))
    return h


def headline_score(results: list[EpisodeResult], headline: EpisodeHeadline) -> HeadlineScore:
    scores = [
        EpisodeScore(episode_id=r.episode_id, repeat=r.repeat, score=v)
        for r in results
        if (v := headline(r)) is not None
    ]
    if len(scores) < 2:
        return HeadlineScore(samples=len(scores), scores=scores)
    mean, low, high = mean_ci([s.score for s in scores])
    return HeadlineScore(samples=len(scores), mean=mean, low=low, high=high, scores=scores)


def benchmark_of(info: BenchmarkInfo) -> type[Benchmark]:
    """The run's benchmark class: its tables and headline read stored results and recorded options, not the data."""
    return get_benchmark_class(info.name)
