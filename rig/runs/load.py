"""`rig load`: accuracy under load. The same seeded episodes at each concurrency level, paired against level 1.

Each level is one ordinary run (a `rig bench` run folder) made by a `rig bench --spec` process, the level's RunSpec
written as its `spec.json` as compare and sweep hand their cells theirs, so a level's engine starts clean (no KV
cache or batch state carried over from the level before) and a level that dies can be resumed like any run. Levels
share the seed, so `--limit` samples the same episodes and per-episode scores pair by (episode id, repeat): batching
changes numerics, and the paired flips show how many answers it changed (score flips, and replies whose text changed
at all).

Per level: the headline score with its CI, the paired difference and flips against level 1, TTFT and end-to-end
latency p50/p95/p99 over generations (requests), completion tokens per second of the level's wall time, and goodput
against the SLOs. A level whose episodes were never that many in flight at once (or all of them, when fewer)
does not pass: something capped it. The verdict is the highest level whose score is non-inferior to level 1 (the
lower bound of the paired CI above -margin) and where every SLO holds; "none" with the reason otherwise. A value that
was not measured is None and fails whatever needs it, never 0.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from rig.records import EpisodeResult, write_atomic, write_record
from rig.runs.bench import BenchError, BenchOptions
from rig.runs.spec import RunSpec
from rig.scoring.stats import percentile

QUANTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0}
METRICS = ("ttft", "e2e")
LOAD_FORMAT = 1  # load.json's format; bump and read the old one when it changes


class Slo(BaseModel):
    """A latency objective: the `quantile` of the per-request `metric` at most `limit_s` seconds."""

    metric: Literal["ttft", "e2e"]
    quantile: Literal["p50", "p95", "p99"]
    limit_s: float = Field(gt=0)

    @property
    def key(self) -> str:
        return f"{self.metric}_{self.quantile}"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)?\s*$")


def parse_duration(text: str) -> float:
    """'2s', '500ms', '1.5m' or a bare number of seconds -> seconds; ValueError naming the text otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (e.g. 2s, 500ms, 1.5m)")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2) or "s"]


def parse_slos(text: str | None) -> list[Slo]:
    """`ttft_p95=2s,e2e_p95=30s` -> SLOs; a BenchError naming --slo and the item otherwise."""
    slos: list[Slo] = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        key, eq, value = item.partition("=")
        metric, _, q = key.strip().partition("_")
        if not eq or metric not in METRICS or q not in QUANTILES:
            keys = ", ".join(f"{m}_{p}" for m in METRICS for p in QUANTILES)
            raise BenchError(f"--slo {item!r}: expected KEY=DURATION with KEY one of {keys}")
        try:
            limit = parse_duration(value)
        except ValueError as e:
            raise BenchError(f"--slo {item!r}: {e}") from None
        if limit <= 0:
            raise BenchError(f"--slo {item!r}: the limit must be above 0")
        slo = Slo(metric=metric, quantile=q, limit_s=limit)  # type: ignore[arg-type]
        if any(s.key == slo.key for s in slos):
            raise BenchError(f"--slo {item!r}: {slo.key} is given twice")
        slos.append(slo)
    return slos


def parse_levels(text: str) -> list[int]:
    """`1,2,4` -> ascending distinct levels that start at 1 (the reference); a BenchError naming the item."""
    levels: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        try:
            n = int(item)
        except ValueError:
            raise BenchError(f"--concurrency {text!r}: {item!r} is not a whole number") from None
        if n < 1:
            raise BenchError(f"--concurrency {text!r}: {n} is below 1")
        levels.append(n)
    if len(set(levels)) != len(levels):
        raise BenchError(f"--concurrency {text!r}: a level is listed twice")
    if levels != sorted(levels):
        raise BenchError(f"--concurrency {text!r}: list the levels in ascending order")
    if levels[0] != 1:
        raise BenchError(f"--concurrency {text!r}: the first level must be 1, the reference the others are paired with")
    if len(levels) < 2:
        raise BenchError(f"--concurrency {text!r}: give at least two levels (1 and a higher one)")
    return levels


class LoadSettings(BaseModel):
    """What `rig load` was asked: the run (`bench`; its own concurrency is replaced by each level), the levels, the
    SLOs and the non-inferiority margin (in headline-score units: 0.05 = five points of accuracy)."""

    bench: BenchOptions
    levels: list[int]
    slos: list[Slo] = Field(default_factory=list)
    margin: float = Field(default=0.05, ge=0, lt=1)


class SloCheck(BaseModel):
    key: str
    limit_s: float
    value_s: float | None  # None: not measured at this level
    holds: bool | None  # None: not measured, which does not hold


class LevelResult(BaseModel):
    level: int
    run_id: str
    episodes: int
    failed: int
    peak_in_flight: int | None  # episodes observed running at once (from their start and finish times)
    samples: int  # episodes with a headline score
    score: float | None
    score_low: float | None
    score_high: float | None
    paired: int  # episodes scored at both this level and level 1
    diff: float | None  # mean paired difference (this level - level 1)
    diff_low: float | None
    diff_high: float | None
    flips_to_correct: int
    flips_to_wrong: int
    replies_changed: int | None = None  # paired episodes whose reply texts differ from level 1's (numerics)
    non_inferior: bool | None  # None: fewer than two paired episodes, so not measured
    ttft_s: dict[str, float | None]  # p50 / p95 / p99 over generations
    e2e_s: dict[str, float | None]
    wall_s: float | None  # first episode start to last episode end
    completion_tokens: int | None
    tokens_per_s: float | None
    goodput_per_s: float | None  # episodes per second whose every request met every SLO threshold
    goodput_share: float | None
    goodput_note: str | None = None  # why goodput was not measured
    slos: list[SloCheck] = Field(default_factory=list)
    passes: bool = False
    why_not: list[str] = Field(default_factory=list)


class LoadVerdict(BaseModel):
    level: int | None  # None: no level passes
    reason: str


class LoadReport(BaseModel):
    format_version: int = LOAD_FORMAT
    model: str
    benchmark: str | None
    levels: list[int]
    slos: list[Slo]
    margin: float
    results: list[LevelResult]
    verdict: LoadVerdict


@dataclass
class LevelOutputs:
    """A level's per-episode headline scores and reply texts, which the other levels are paired with."""

    scores: dict[tuple[str, int], float]
    texts: dict[tuple[str, int], list[str]]


# -- measuring a level -------------------------------------------------------------------------------------------


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


def measure_level(
    level: int,
    run_dir: Path,
    base: LevelOutputs | None,
    slos: list[Slo],
    margin: float,
) -> tuple[LevelResult, LevelOutputs]:
    """A level's numbers from its run folder, paired against level 1's per-episode scores (`base`; None: this is
    level 1). Returns the result and this level's scores and replies."""
    from rig.runs.compare import paired
    from rig.runs.folder import RunFolder
    from rig.runs.summary import HeadlineScore

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
    quant = {"ttft": ttft, "e2e": e2e}
    checks = []
    for s in slos:
        v = percentile(quant[s.metric], QUANTILES[s.quantile])
        checks.append(SloCheck(key=s.key, limit_s=s.limit_s, value_s=v, holds=None if v is None else v <= s.limit_s))
    gp, share, gp_note = _goodput(results, slos, wall)
    why: list[str] = []
    if base is not None:
        if non_inferior is None:
            why.append("accuracy not compared: fewer than two episodes scored at both this level and level 1")
        elif not non_inferior:
            why.append(
                f"accuracy inferior to level 1: paired difference CI low {lo:.3f} is below -{margin:g} (the margin)"
            )
    for c in checks:
        if c.holds is None:
            why.append(f"SLO {c.key} not measured at this level")
        elif not c.holds:
            assert c.value_s is not None
            why.append(f"SLO {c.key} missed: {c.value_s:.3g} s > {c.limit_s:.3g} s")
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
    from rig.runs.folder import RunFolder

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


def engine_max_concurrency(o: BenchOptions) -> tuple[str, int] | None:
    """The model's engine and how many requests it serves at once, from its settings (no model is loaded); None
    when this process cannot tell (the engine's package lives in another interpreter, e.g. vLLM's venv)."""
    from rig.engines import MissingExtra, engine_class
    from rig.registry import RegistryError, load_registry

    assert o.model is not None
    try:
        spec = load_registry(o.models_file).get(o.model)
        eng = engine_class(spec.engine)(spec, "", gpu=None)
    except (RegistryError, MissingExtra, ImportError):
        return None  # the child names a registry problem with its own exit 2
    return spec.engine, eng.capabilities.max_concurrency


def _check(settings: LoadSettings) -> None:
    o = settings.bench
    if o.model is None:
        raise BenchError("--model is required (see `rig models`)")
    if o.benchmark is None:
        raise BenchError("rig load runs one benchmark: name it with --benchmark")
    top = settings.levels[-1]
    cap = engine_max_concurrency(o)
    if cap is not None and cap[1] < top:
        raise BenchError(
            f"--concurrency {top}: model {o.model!r} (engine {cap[0]}) serves at most {cap[1]} request(s) at once; "
            "raise its engine_args (max_concurrency, max_num_seqs) or lower the levels"
        )


def level_argv(ldir: Path, level: int, o: BenchOptions, resume: str | None) -> list[str]:
    """The `rig bench --spec` process of one level: the load's run at that concurrency, its spec.json written under
    ``ldir/specs/level-N/``, its run folder in ``ldir/runs`` (``resume``: the level's run, when it has one)."""
    from rig.runs.compare import bench_argv

    spec = RunSpec.model_validate({**o.spec_fields(), "concurrency": level})
    return bench_argv(spec, ldir / "specs" / f"level-{level}", ldir / "runs", resume)


class LoadPlan(BaseModel):
    """`plan.json` in a load folder: the settings and each level's run id once its run folder exists, so
    `--resume` skips finished levels and resumes an unfinished one's run."""

    format_version: int = LOAD_FORMAT
    settings: LoadSettings
    runs: dict[int, str] = Field(default_factory=dict)  # level -> run id (a folder in the load folder's runs/)


def _open_plan(out: Path, load_id: str) -> tuple[Path, LoadPlan]:
    ldir = out / load_id
    path = ldir / "plan.json"
    if not load_id or "/" in load_id or load_id in (".", ".."):
        raise BenchError(f"--resume {load_id!r}: give a load id (a folder name inside --out {out})")
    try:
        plan = LoadPlan.model_validate_json(path.read_text())
    except OSError as e:
        raise BenchError(f"--resume {load_id}: {path}: cannot read ({e.strerror})") from None
    except ValidationError as e:
        err = e.errors()[0]
        raise BenchError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    if plan.format_version > LOAD_FORMAT:
        raise BenchError(f"{path}: format {plan.format_version} is newer than this rig reads ({LOAD_FORMAT})")
    return ldir, plan


def _finished(run_dir: Path) -> bool:
    from rig.runs.folder import RunFolder

    try:
        return RunFolder(run_dir).manifest.status == "finished"
    except Exception:  # a damaged or missing manifest: resume the run, whose own checks name the problem
        return False


def run_load(
    settings: LoadSettings | None,
    say: Callable[[str], object] = print,
    *,
    resume: str | None = None,
    out: Path = Path("runs"),
) -> tuple[Path, LoadSettings, list[Path]]:
    """Run every level, each in its own process, into a new load folder (or the load folder `resume` inside `out`,
    whose recorded settings are used); return the folder, the settings and the levels' run folders."""
    if resume is not None:
        ldir, plan = _open_plan(out, resume)
        settings = plan.settings
    else:
        if settings is None:
            raise ValueError("settings or resume")
        _check(settings)
        o = settings.bench
        ldir = o.out / f"load-{time.strftime('%Y%m%d-%H%M%S')}-{o.benchmark}"
        try:
            ldir.mkdir(parents=True, exist_ok=False)
        except OSError as e:
            raise BenchError(f"--out {o.out}: cannot create the load folder {ldir} ({e.strerror})") from None
        o = o.model_copy(update={"seed": o.seed if o.seed is not None else 0, "resume": None})
        settings = settings.model_copy(update={"bench": o})
        plan = LoadPlan(settings=settings)
        write_record(ldir / "plan.json", plan)
    o = settings.bench
    runs = ldir / "runs"
    run_dirs: list[Path] = []
    for level in settings.levels:
        known = plan.runs.get(level)
        if known is not None and _finished(runs / known):
            say(f"== concurrency {level}: finished before ({known})")
            run_dirs.append(runs / known)
            continue
        say(f"== concurrency {level} (own process)" + (f", resuming {known}" if known else ""))
        before = set(runs.glob("*")) if runs.exists() else set()
        r = subprocess.run(level_argv(ldir, level, o, known), stdout=None, stderr=None)
        new = set(runs.glob("*")) - before if runs.exists() else set()
        if known is None and len(new) == 1:
            plan.runs[level] = new.pop().name
            write_record(ldir / "plan.json", plan)
        if r.returncode != 0 or level not in plan.runs:
            hint = f"; resume with: rig load --resume {ldir.name} --out {ldir.parent}" if level in plan.runs else ""
            raise BenchError(f"level {level}: rig bench failed (exit {r.returncode}); see its output above{hint}")
        run_dirs.append(runs / plan.runs[level])
    return ldir, settings, run_dirs


# -- the report --------------------------------------------------------------------------------------------------


def load_tables(rep: LoadReport) -> list[Any]:
    from rig.benchmarks.base import Table

    def nm(v: float | None) -> float | str:
        return "not measured" if v is None else v

    rows = []
    for r in rep.results:
        rows.append(
            [
                r.level,
                nm(r.peak_in_flight),
                r.samples,
                nm(r.score),
                nm(r.score_low),
                nm(r.score_high),
                "reference" if r.level == rep.levels[0] else nm(r.diff),
                "" if r.level == rep.levels[0] else nm(r.diff_low),
                "" if r.level == rep.levels[0] else f"{r.flips_to_correct} / {r.flips_to_wrong}",
                "" if r.level == rep.levels[0] else nm(r.replies_changed),
                *(nm(r.ttft_s[q]) for q in QUANTILES),
                *(nm(r.e2e_s[q]) for q in QUANTILES),
                nm(r.tokens_per_s),
                r.goodput_note if r.goodput_per_s is None else r.goodput_per_s,
                "yes" if r.passes else "no: " + "; ".join(r.why_not),
            ]
        )
    slo_text = ", ".join(f"{s.key} <= {s.limit_s:g} s" for s in rep.slos) or "none given"
    t = Table(
        title=f"Accuracy under load: {rep.model} on {rep.benchmark}",
        columns=[
            "Concurrency",
            "Peak in flight",
            "Samples",
            "Score",
            "CI low",
            "CI high",
            "Paired diff",
            "Diff CI low",
            "Flips to correct / wrong",
            "Replies changed",
            *(f"TTFT {q} (s)" for q in QUANTILES),
            *(f"E2E {q} (s)" for q in QUANTILES),
            "Completion tok/s",
            "Goodput (episodes/s)",
            "Passes",
        ],
        rows=rows,
        note=f"Score = the benchmark's headline per-episode score, 95% bootstrap CI; paired against level 1 by "
        "(episode, repeat); a flip compares scores at 0.5; replies changed counts paired episodes whose reply texts "
        "differ from level 1's (same seed, batched numerics). "
        f"Non-inferior: paired-difference CI low >= -{rep.margin:g}. "
        f"SLOs: {slo_text}, over every request of the level; goodput counts episodes whose every request met every "
        "SLO threshold. Peak in flight is observed from episode start and finish times.",
    )
    return [t]


def load_figure(rep: LoadReport) -> Any:
    from rig.runs.plots import load_plot

    rs = rep.results
    return load_plot(
        [r.level for r in rs],
        [(r.score, r.score_low, r.score_high) for r in rs],
        {"TTFT p95": [r.ttft_s["p95"] for r in rs], "E2E p95": [r.e2e_s["p95"] for r in rs]},
        f"{rep.model} on {rep.benchmark}",
    )


def load_markdown(rep: LoadReport, figure: str) -> str:
    """The verdict, the table, then `figure` (its markdown, or why there is none)."""
    from rig.runs.report import table_md

    v = rep.verdict
    head = f"**Verdict: {'none' if v.level is None else f'concurrency {v.level}'}** ({v.reason})."
    lines = [f"# rig load: {rep.model} on {rep.benchmark}", "", head, ""]
    lines += [table_md(t) for t in load_tables(rep)]
    lines += [figure, ""]
    return "\n".join(lines)


def load_html(rep: LoadReport, figure: str) -> str:
    """The self-contained page (the run report's CSP and styles): the verdict, the table, then `figure` (inline SVG,
    or a note saying why there is none)."""
    from html import escape

    from rig.runs.html import CSP, CSS, table_html

    v = rep.verdict
    title = f"rig load: {rep.model} on {rep.benchmark}"
    verdict = "none" if v.level is None else f"concurrency {v.level}"
    return (
        f'<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
        f"<p><b>Verdict: {escape(verdict)}</b> ({escape(v.reason)}).</p>"
        + "".join(table_html(t) for t in load_tables(rep))
        + f'<div class="plots">{figure}</div></body></html>'
    )


def write_load(ldir: Path, rep: LoadReport) -> str:
    """load.json (the typed report), load.md, load.html and the figure (SVG, PDF, PNG) in the load folder, each
    written whole (`write_atomic`)."""
    from html import escape

    from rig.runs.plots import PlotsUnavailable, figure_svg, save_figure

    write_record(ldir / "load.json", rep)
    try:
        fig = load_figure(rep)
        save_figure(fig, ldir, "load")
        figure = "![score and p95 latency against concurrency](load.svg)"
        inline = figure_svg(fig)
    except PlotsUnavailable as e:
        figure = f"_No figure: {e}._"
        inline = f'<p class="note">No figure: {escape(str(e))}.</p>'
    md = load_markdown(rep, figure)
    write_atomic(ldir / "load.md", md)
    write_atomic(ldir / "load.html", load_html(rep, inline))
    return md
