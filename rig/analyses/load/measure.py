"""Measuring one level of a load test from its run folder (latency quantiles, goodput against the SLOs, paired
flips), and the verdict over levels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rig.analyses.load.records import LevelOutputs, LevelResult, LoadReport, LoadSettings, LoadVerdict, SloCheck
from rig.analyses.load.slo import QUANTILES, Slo
from rig.records import EpisodeResult
from rig.scoring.stats import percentile


def peak_in_flight(results: Sequence[EpisodeResult]) -> int | None:
    """Most episodes running at once, from their recorded start and finish times (None when a time is missing)."""
    spans = [(r.started_at, r.finished_at) for r in results]
    if not spans or any(a is None or b is None for a, b in spans):
        return None
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    peak = now = 0
    for _, step in events:  # an end sorts before a start at the same instant: touching spans do not overlap
        now += step
        peak = max(peak, now)
    return peak


def _goodput(
    results: Sequence[EpisodeResult], slos: list[Slo], wall_s: float | None
) -> tuple[float | None, float | None, str | None]:
    """Episodes whose every request met every SLO's threshold (a failed episode never does), per second and as a
    share. The SLO's threshold is applied per request, as serving benchmarks define goodput."""
    if not slos:
        return None, None, "no SLO given"
    if not results or not wall_s:
        return None, None, "no episode with start and finish times"
    good = 0
    for r in results:
        if r.status == "failed" or not r.generations:
            continue
        ok = True
        for g in r.generations:
            for s in slos:
                v = g.timings.ttft_s if s.metric == "ttft" else g.timings.e2e_s
                if v is None:
                    return None, None, f"{s.metric} not measured for every request"
                ok = ok and v <= s.limit_s
        good += ok
    return good / wall_s, good / len(results), None


def _slo_checks(slos: list[Slo], quant: dict[str, list[float]]) -> list[SloCheck]:
    """Each SLO against its quantile of the level's latencies (``quant``: the seconds by metric)."""
    checks = []
    for s in slos:
        v = percentile(quant[s.metric], QUANTILES[s.quantile])
        checks.append(SloCheck(key=s.key, limit_s=s.limit_s, value_s=v, holds=None if v is None else v <= s.limit_s))
    return checks


def _accuracy_why_not(non_inferior: bool | None, lo: float | None, margin: float) -> list[str]:
    if non_inferior is None:
        return ["accuracy not compared: fewer than two episodes scored at both this level and level 1"]
    if not non_inferior:
        return [f"accuracy inferior to level 1: paired difference CI low {lo:.3f} is below -{margin:g} (the margin)"]
    return []


def _slo_why_not(checks: list[SloCheck]) -> list[str]:
    why = []
    for c in checks:
        if c.holds is None:
            why.append(f"SLO {c.key} not measured at this level")
        elif not c.holds:
            assert c.value_s is not None
            why.append(f"SLO {c.key} missed: {c.value_s:.3g} s > {c.limit_s:.3g} s")
    return why


def measure_level(
    level: int,
    run_dir: Path,
    base: LevelOutputs | None,
    slos: list[Slo],
    margin: float,
) -> tuple[LevelResult, LevelOutputs]:
    """A level's numbers from its run folder, paired against level 1's per-episode scores (`base`; None: this is
    level 1). Returns the result and this level's scores and replies."""
    from rig.analyses.compare import paired
    from rig.runfolder.folder import RunFolder
    from rig.runfolder.summary import HeadlineScore

    folder = RunFolder(run_dir)
    man, info = folder.manifest, folder.benchmarks[0]
    results = folder.results(info.name)
    h = folder.summary(info.name).headline or HeadlineScore(samples=0)
    scores = h.by_episode()
    texts = {(r.episode_id, r.repeat): [g.text for g in r.generations] for r in results}
    gens = [g for r in results for g in r.generations]
    ttft = [g.timings.ttft_s for g in gens if g.timings.ttft_s is not None]
    e2e = [g.timings.e2e_s for g in gens if g.timings.e2e_s is not None]
    starts = [r.started_at for r in results if r.started_at is not None]
    ends = [r.finished_at for r in results if r.finished_at is not None]
    wall = max(ends) - min(starts) if starts and ends and max(ends) > min(starts) else None
    ct = [g.completion_tokens for g in gens if g.completion_tokens is not None]
    tokens = sum(ct) if ct else None
    ref = scores if base is None else base.scores
    ref_texts = texts if base is None else base.texts
    same = set(ref_texts) & set(texts)
    keys = sorted(set(ref) & set(scores))
    n, d, lo, hi, better, worse = paired(ref, scores, keys)
    if base is None:
        non_inferior: bool | None = True  # the reference is non-inferior to itself
    else:
        non_inferior = None if lo is None else lo >= -margin
    checks = _slo_checks(slos, {"ttft": ttft, "e2e": e2e})
    gp, share, gp_note = _goodput(results, slos, wall)
    why = [] if base is None else _accuracy_why_not(non_inferior, lo, margin)
    why += _slo_why_not(checks)
    if not results:
        why.append("no stored results")
    peak = peak_in_flight(results)
    if peak is not None and peak < min(level, len(results)):  # the engine or runner capped it: not this level
        why.append(f"level not reached: at most {peak} episode(s) were in flight at once")
    res = LevelResult(
        level=level,
        run_id=man.run_id,
        episodes=len(results),
        failed=sum(r.status == "failed" for r in results),
        peak_in_flight=peak,
        samples=h.samples,
        score=h.mean,
        score_low=h.low,
        score_high=h.high,
        paired=int(n or 0),
        diff=d,
        diff_low=lo,
        diff_high=hi,
        flips_to_correct=int(better or 0),
        flips_to_wrong=int(worse or 0),
        replies_changed=sum(texts[k] != ref_texts[k] for k in same) if same else None,
        non_inferior=non_inferior,
        ttft_s={q: percentile(ttft, p) for q, p in QUANTILES.items()},
        e2e_s={q: percentile(e2e, p) for q, p in QUANTILES.items()},
        wall_s=wall,
        completion_tokens=tokens,
        tokens_per_s=tokens / wall if tokens is not None and wall else None,
        goodput_per_s=gp,
        goodput_share=share,
        goodput_note=gp_note,
        slos=checks,
        passes=not why,
        why_not=why,
    )
    return res, LevelOutputs(scores=scores, texts=texts)


def verdict(results: list[LevelResult]) -> LoadVerdict:
    """The highest level that passes; "none" naming why each level failed when none does."""
    passing = [r for r in results if r.passes]
    if passing:
        top = passing[-1]
        failed_below = [r.level for r in results if not r.passes and r.level < top.level]
        note = f" (levels {', '.join(map(str, failed_below))} below it did not pass)" if failed_below else ""
        higher = [r for r in results if r.level > top.level]
        stop = f"; level {higher[0].level}: {'; '.join(higher[0].why_not)}" if higher else ""
        return LoadVerdict(
            level=top.level,
            reason=f"level {top.level} is the highest level non-inferior to level 1 with every SLO holding"
            + note
            + stop,
        )
    return LoadVerdict(
        level=None, reason="; ".join(f"level {r.level}: {', '.join(r.why_not)}" for r in results) or "no levels ran"
    )


def analyse(settings: LoadSettings, run_dirs: list[Path]) -> LoadReport:
    """The load report from the levels' run folders (in the order of `settings.levels`)."""
    from rig.runfolder.folder import RunFolder

    if len(run_dirs) != len(settings.levels):
        raise ValueError("one run folder per level")
    results: list[LevelResult] = []
    base: LevelOutputs | None = None
    for level, d in zip(settings.levels, run_dirs, strict=True):
        res, outputs = measure_level(level, d, base, settings.slos, settings.margin)
        if base is None:
            base = outputs
        results.append(res)
    cfg = RunFolder(run_dirs[0]).manifest.config
    return LoadReport(
        model=cfg.model.name,
        benchmark=cfg.benchmarks[0].name if cfg.benchmarks else None,
        levels=settings.levels,
        slos=settings.slos,
        margin=settings.margin,
        results=results,
        verdict=verdict(results),
    )


# -- running the levels ------------------------------------------------------------------------------------------
