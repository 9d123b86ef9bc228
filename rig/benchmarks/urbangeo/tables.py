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


def table4(results: list[EpisodeResult], model: str) -> Table:
    ks = _knowledge(results)
    by = {d: [_correct(r) for r in ks if r.tags.get("dimension") == d] for d in DIMENSIONS}
    return Table(title="UrbanGeoEval Knowledge Module: accuracy (%) by dimension (layout of the paper's Table 4)",
                 columns=["Model", *DIMENSIONS, "Overall"],
                 rows=[[model, *(_pct(by[d]) for d in DIMENSIONS), _pct([_correct(r) for r in ks])]],
                 note="Questions per dimension: " + ", ".join(f"{d} {len(by[d])}" for d in DIMENSIONS)
                      + f". Overall is over all {len(ks)} questions x repeats. A reply with no readable letter is "
                        "wrong; engine failures count as wrong.")


def template_table(results: list[EpisodeResult]) -> Table:
    ks = _knowledge(results)
    rows = []
    for t, template in TEMPLATES.items():
        dim, strategy = template.dimension, template.strategy
        rs = [r for r in ks if r.tags.get("template") == t]
        if not rs:
            continue
        rows.append([t, dim, strategy, len(rs), _pct([_correct(r) for r in rs]),
                     sum(1 for r in rs if not r.scores.get("parsed"))])
    return Table(title="UrbanGeoEval knowledge accuracy per template (the paper's Figures 18-30)",
                 columns=["Template", "Dimension", "Distractors", "Questions", "Accuracy (%)", "Unreadable replies"],
                 rows=rows)


def _total_pct(r: EpisodeResult) -> float | None:
    return r.scores.get("total_pct")


def city_table(results: list[EpisodeResult]) -> Table:
    cities = sorted({r.tags.get("city", "") for r in results})
    rows = []
    for c in cities:
        ks = [r for r in _knowledge(results) if r.tags.get("city") == c]
        rs = [r for r in _reasoning(results) if r.tags.get("city") == c]
        rows.append([c, len(ks), _pct([_correct(r) for r in ks]), len(rs), _avg([_total_pct(r) for r in rs])])
    return Table(title="UrbanGeoEval per city (the paper's Figure 5)",
                 columns=["City", "Knowledge questions", "Knowledge accuracy (%)", "Reasoning problems",
                          "Reasoning total (% of points)"], rows=rows,
                 note="Reasoning total is over problems with a parsed judge verdict. "
                      "`python -m rig.benchmarks.urbangeo.plot RUN_DIR` draws knowledge accuracy per city as SVG.")


def table5(results: list[EpisodeResult], model: str) -> Table:
    rs = _reasoning(results)
    row: list[Any] = [model]
    for t in TASKS:
        tr = [r for r in rs if r.tags.get("task") == t]
        row += [_avg([r.scores.get("reason") for r in tr]), _avg([r.scores.get("answer") for r in tr])]
    row.append(_avg([_total_pct(r) for r in rs]))
    cols = ["Model"] + [f"{t} {p}" for t in TASKS for p in ("R", "A")] + ["Total (%)"]
    return Table(title="UrbanGeoEval Reasoning Module: reasoning R and answer A per task (layout of the paper's "
                       "Table 5)", columns=cols, rows=[row],
                 note="R: judge's reasoning score (max 15 for DS, DR, RE; 20 for PN, PR, NV, RC), averaged over "
                      "problems whose verdict parsed. A: answer score (max 10); by program for DS (distance "
                      "penalty), DR (bearing penalty), RE and PR (exact match), PN (Hamming, 2 points per misplaced "
                      "stop); by the judge for NV and RC. Total: (R + A) as % of 25 or 30, over parsed verdicts. "
                      "Tasks: " + ", ".join(f"{k} {v[0]}" for k, v in TASKS.items()) + ".")


def judge_table(results: list[EpisodeResult]) -> Table:
    rs = _reasoning(results)
    rows = []
    for t in TASKS:
        tr = [r for r in rs if r.tags.get("task") == t]
        if not tr:
            continue
        status = Counter((r.output or {}).get("judge", {}).get("status", "not judged") for r in tr)
        models = sorted({r.tags.get("judge", "") for r in tr})
        temps = sorted({r.tags.get("judge_temperature", "") for r in tr})
        pure = [(r.scores["reason"] + r.scores["answer_judge"]) / r.scores["points_max"] * 100 for r in tr
                if r.scores.get("reason") is not None and r.scores.get("answer_judge") is not None]
        rows.append([t, len(tr), status.get("ok", 0), sum(status.get(s, 0) for s in UNPARSED),
                     ", ".join(f"{s} {status[s]}" for s in UNPARSED if status.get(s)) or "-",
                     status.get("error", 0) + status.get("not judged", 0), ", ".join(models), ", ".join(temps),
                     _avg([_total_pct(r) for r in tr]), _avg(pure)])
    return Table(title="UrbanGeoEval judge verdicts per task",
                 columns=["Task", "Problems", "Parsed", "Unparsed", "Unparsed by reason", "Judge errors / not judged",
                          "Judge model", "Judge temperature", "Hybrid total (%)", "Pure-judge total (%)"],
                 rows=rows,
                 note="Unparsed verdicts (judge_unparsed) carry no reasoning score; they are counted here, not as 0. "
                      "Pure-judge total uses the judge's own answer score for every task (the paper's appendix F.1 "
                      "comparison).")


def relation_table(results: list[EpisodeResult]) -> Table:
    rs = [r for r in _reasoning(results) if r.tags.get("task") == "RE"]
    rows = []
    for s in RELATION_SUBTYPES:
        tr = [r for r in rs if r.tags.get("subtype") == s]
        if tr:
            rows.append([s, len(tr), _avg([r.scores.get("reason") for r in tr]),
                         _avg([r.scores.get("answer") for r in tr])])
    return Table(title="UrbanGeoEval Relation by subtype", columns=["Subtype", "Problems", "R", "A"], rows=rows)


def urbangeo_tables(results: list[EpisodeResult], label: str = "") -> list[Table]:
    model = label or "model"
    out = []
    if _knowledge(results):
        out += [table4(results, model), template_table(results)]
    if _reasoning(results):
        out += [table5(results, model), judge_table(results)]
        if any(r.tags.get("task") == "RE" for r in results):
            out.append(relation_table(results))
    out.append(city_table(results))
    return out
