"""Report tables from stored results only (no map pack needed): the paper's Table 4 (knowledge accuracy by
dimension) and Table 5 (reasoning score R and answer score A per task) layouts, plus per-template, per-city and
judge tables. A run holds one model, so the paper's model rows become one row (`rig compare` joins runs)."""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from rig.benchmarks.base import Table
from rig.benchmarks.urbangeo.knowledge import DIMENSIONS, TEMPLATES
from rig.benchmarks.urbangeo.reasoning import RELATION_SUBTYPES, TASKS
from rig.records import EpisodeResult

PROGRAM_TASKS = ("DS", "DR", "RE", "PN", "PR")  # answer scored by program (the judge scores one too)

UNPARSED = ("missing", "malformed", "ambiguous", "out_of_range", "inconsistent_total")


def _pct(vals: list[float]) -> float | None:
    return round(100 * mean(vals), 2) if vals else None


def _avg(vals: list[Any]) -> float | None:
    xs = [float(v) for v in vals if v is not None]
    return round(mean(xs), 2) if xs else None


def _knowledge(results: list[EpisodeResult]) -> list[EpisodeResult]:
    return [r for r in results if r.tags.get("module") == "knowledge"]


def _reasoning(results: list[EpisodeResult]) -> list[EpisodeResult]:
    return [r for r in results if r.tags.get("module") == "reasoning"]


def _correct(r: EpisodeResult) -> float:
    return float(r.scores.get("correct") or 0.0)  # an engine failure counts as wrong


def macro_overall(per_dimension: list[float | None]) -> float | None:
    """The paper's Table 4 Overall: the mean of the dimension accuracies (Llama-3.1-70B's row: 46.72 from its six
    cells), over the dimensions that have questions."""
    xs = [x for x in per_dimension if x is not None]
    return round(mean(xs), 2) if xs else None


def table4(results: list[EpisodeResult], model: str) -> Table:
    ks = _knowledge(results)
    by = {d: [_correct(r) for r in ks if r.tags.get("dimension") == d] for d in DIMENSIONS}
    cells = [_pct(by[d]) for d in DIMENSIONS]
    present = sum(1 for c in cells if c is not None)
    return Table(
        title="UrbanGeoEval Knowledge Module: accuracy (%) by dimension (layout of the paper's Table 4)",
        columns=["Model", *DIMENSIONS, "Overall", "Overall (micro)"],
        rows=[
            [
                model,
                *cells,
                macro_overall([100 * mean(by[d]) if by[d] else None for d in DIMENSIONS]),
                _pct([_correct(r) for r in ks]),
            ]
        ],
        note="Questions per dimension: "
        + ", ".join(f"{d} {len(by[d])}" for d in DIMENSIONS)
        + f". Overall is the paper's: the mean of the {present} dimension accuracies (macro"
        + (
            ""
            if present == len(DIMENSIONS)
            else f"; {len(DIMENSIONS) - present} dimension(s) without "
            "questions left out, so not comparable with the paper's"
        )
        + f"); Overall (micro) is over all {len(ks)} questions x repeats. A reply with no readable "
        "letter is wrong; engine failures count as wrong.",
    )


def template_table(results: list[EpisodeResult]) -> Table:
    ks = _knowledge(results)
    rows = []
    for t, template in TEMPLATES.items():
        dim, strategy = template.dimension, template.strategy
        rs = [r for r in ks if r.tags.get("template") == t]
        if not rs:
            continue
        rows.append(
            [
                t,
                dim,
                strategy,
                len(rs),
                _pct([_correct(r) for r in rs]),
                sum(1 for r in rs if not r.scores.get("parsed")),
            ]
        )
    return Table(
        title="UrbanGeoEval knowledge accuracy per template (the paper's Figures 18-30)",
        columns=["Template", "Dimension", "Distractors", "Questions", "Accuracy (%)", "Unreadable replies"],
        rows=rows,
    )


def judged_by(results: list[EpisodeResult], options: Any = None) -> str:
    """Who gave R: the judge model(s) the results name, "self-judged" when the candidate judged itself. Results
    stored before the `judge_self` tag read it from the recorded options (no `judge` option: the candidate)."""
    rs = _reasoning(results)
    names = sorted({r.tags.get("judge", "") for r in rs} - {""}) or ["unknown"]
    recorded_self = getattr(options, "judge", "x") is None
    selfs = {r.tags.get("judge_self", "yes" if recorded_self else "no") for r in rs}
    label = ", ".join(names)
    if selfs == {"yes"}:
        return f"judge: {label}, self-judged"
    if "yes" in selfs:
        return f"judge: {label}, partly self-judged"
    return f"judge: {label}"


def _total_pct(r: EpisodeResult) -> float | None:
    return r.scores.get("total_pct")


def _pure_judge_pct(r: EpisodeResult) -> float | None:
    """Reasoning plus the judge's own answer score, in % of the points; None when the judge gave either no score."""
    reason, answer = r.scores.get("reason"), r.scores.get("answer_judge")
    if reason is None or answer is None:
        return None
    points_max = r.scores["points_max"]
    assert points_max is not None  # set on every reasoning result
    return (reason + answer) / points_max * 100


def city_table(results: list[EpisodeResult], judge: str = "") -> Table:
    cities = sorted({r.tags.get("city", "") for r in results})
    rows = []
    for c in cities:
        ks = [r for r in _knowledge(results) if r.tags.get("city") == c]
        rs = [r for r in _reasoning(results) if r.tags.get("city") == c]
        rows.append([c, len(ks), _pct([_correct(r) for r in ks]), len(rs), _avg([_total_pct(r) for r in rs])])
    return Table(
        title=f"UrbanGeoEval per city (the paper's Figure 5){f' ({judge})' if judge else ''}",
        columns=[
            "City",
            "Knowledge questions",
            "Knowledge accuracy (%)",
            "Reasoning problems",
            "Reasoning total (% of points)",
        ],
        rows=rows,
        note="Reasoning total is over problems with a parsed judge verdict. "
        "`python -m rig.benchmarks.urbangeo.plot RUN_DIR` draws knowledge accuracy per city as SVG.",
    )


def table5(results: list[EpisodeResult], model: str, judge: str = "") -> Table:
    rs = _reasoning(results)
    row: list[Any] = [model]
    for t in TASKS:
        tr = [r for r in rs if r.tags.get("task") == t]
        row += [_avg([r.scores.get("reason") for r in tr]), _avg([r.scores.get("answer") for r in tr])]
    row.append(_avg([_total_pct(r) for r in rs]))
    cols = ["Model"] + [f"{t} {p}" for t in TASKS for p in ("R", "A")] + ["Total (%)"]
    return Table(
        title="UrbanGeoEval Reasoning Module: reasoning R and answer A per task (layout of the paper's "
        f"Table 5{'; ' + judge if judge else ''})",
        columns=cols,
        rows=[row],
        note="R: judge's reasoning score (max 15 for DS, DR, RE; 20 for PN, PR, NV, RC), averaged over "
        "problems whose verdict parsed. A: answer score (max 10); by program for DS (distance "
        "penalty), DR (bearing penalty), RE and PR (exact match), PN (Hamming, 2 points per misplaced "
        "stop); by the judge for NV and RC. Total: (R + A) as % of 25 or 30, over parsed verdicts. "
        "Tasks: " + ", ".join(f"{k} {v[0]}" for k, v in TASKS.items()) + ". The paper's judge is "
        "GPT-4o; a self-judged run's R is the candidate grading itself.",
    )


def judge_table(results: list[EpisodeResult], judge: str = "") -> Table:
    rs = _reasoning(results)
    rows = []
    for t in TASKS:
        tr = [r for r in rs if r.tags.get("task") == t]
        if not tr:
            continue
        status = Counter((r.output or {}).get("judge", {}).get("status", "not judged") for r in tr)
        models = sorted({r.tags.get("judge", "") for r in tr})
        temps = sorted({r.tags.get("judge_temperature", "") for r in tr})
        pure = [_pure_judge_pct(r) for r in tr]
        rows.append(
            [
                t,
                len(tr),
                status.get("ok", 0),
                sum(status.get(s, 0) for s in UNPARSED),
                ", ".join(f"{s} {status[s]}" for s in UNPARSED if status.get(s)) or "-",
                status.get("error", 0) + status.get("not judged", 0),
                ", ".join(models),
                ", ".join(temps),
                _avg([_total_pct(r) for r in tr]),
                _avg(pure),
            ]
        )
    return Table(
        title=f"UrbanGeoEval judge verdicts per task{f' ({judge})' if judge else ''}",
        columns=[
            "Task",
            "Problems",
            "Parsed",
            "Unparsed",
            "Unparsed by reason",
            "Judge errors / not judged",
            "Judge model",
            "Judge temperature",
            "Hybrid total (%)",
            "Pure-judge total (%)",
        ],
        rows=rows,
        note="Unparsed verdicts (judge_unparsed) carry no reasoning score; they are counted here, not as 0. "
        "Pure-judge total uses the judge's own answer score for every task (the paper's appendix F.1 "
        "comparison).",
    )


def agreement_table(results: list[EpisodeResult], judge: str) -> Table | None:
    """Program vs judge on the same answers: DS, DR, RE, PN and PR are scored by program and the judge also gives
    an answer score; where they disagree, the judge (or the program's reading) is wrong."""
    rows = []
    for t in PROGRAM_TASKS:
        pairs = []
        for r in _reasoning(results):
            p, j = r.scores.get("answer_program"), r.scores.get("answer_judge")
            if r.tags.get("task") == t and p is not None and j is not None:
                pairs.append((float(p), float(j)))
        if not pairs:
            continue
        diffs = [j - p for p, j in pairs]
        rows.append(
            [
                t,
                len(pairs),
                _avg([p for p, _ in pairs]),
                _avg([j for _, j in pairs]),
                _avg(diffs),
                _avg([abs(d) for d in diffs]),
                _pct([float(abs(d) <= 1.0) for d in diffs]),
                _pct([float((p >= 5) == (j >= 5)) for p, j in pairs]),
            ]
        )
    if not rows:
        return None
    return Table(
        title=f"UrbanGeoEval program vs judge answer scores ({judge})",
        columns=[
            "Task",
            "Pairs",
            "Program A",
            "Judge A",
            "Judge - program",
            "Mean |difference|",
            "Within 1 point (%)",
            "Same side of 5 (%)",
        ],
        rows=rows,
        note="Answers both scored (A out of 10): by program (the score the tables use) and by the judge. "
        "Pairs are problems whose judge verdict parsed. A good judge sits near the program: a large "
        "mean difference or low agreement says its R is not to be trusted either.",
    )


def relation_table(results: list[EpisodeResult], judge: str = "") -> Table:
    rs = [r for r in _reasoning(results) if r.tags.get("task") == "RE"]
    rows = []
    for s in RELATION_SUBTYPES:
        tr = [r for r in rs if r.tags.get("subtype") == s]
        if tr:
            rows.append(
                [s, len(tr), _avg([r.scores.get("reason") for r in tr]), _avg([r.scores.get("answer") for r in tr])]
            )
    return Table(
        title=f"UrbanGeoEval Relation by subtype{f' ({judge})' if judge else ''}",
        columns=["Subtype", "Problems", "R", "A"],
        rows=rows,
    )


def urbangeo_tables(results: list[EpisodeResult], label: str = "", options: Any = None) -> list[Table]:
    model = label or "model"
    out = []
    judge = judged_by(results, options) if _reasoning(results) else ""
    if _knowledge(results):
        out += [table4(results, model), template_table(results)]
    if _reasoning(results):
        out += [table5(results, model, judge), judge_table(results, judge)]
        agree = agreement_table(results, judge)
        if agree is not None:
            out.append(agree)
        if any(r.tags.get("task") == "RE" for r in results):
            out.append(relation_table(results, judge))
    out.append(city_table(results, judge))
    return out
