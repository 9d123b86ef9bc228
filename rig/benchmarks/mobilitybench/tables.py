"""MobilityBench aggregation: per-metric means over the episodes where a metric is defined, and the reference
pipeline's own aggregate (reproduced exactly for its results)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from statistics import mean, median
from typing import Any

from pydantic import BaseModel, Field

from rig.benchmarks.base import Table
from rig.benchmarks.mobilitybench import scoring as M
from rig.benchmarks.mobilitybench.lexicon import FAMILIES, SCENARIOS
from rig.benchmarks.mobilitybench.scoring import METRICS
from rig.records import EpisodeResult

COLUMNS = list(METRICS)


def mean_of(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def aggregate(rows: list[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Per metric, the mean over the episodes where it is defined (None if none)."""
    return {m: mean_of(r.get(m) for r in rows) for m in METRICS}


class RefResult(BaseModel):
    """One result of the reference pipeline's metric (for reproducing its aggregation exactly)."""

    score: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


def aggregate_reference(results: list[RefResult]) -> dict[str, Any]:
    """The reference aggregate: per numeric detail field, the mean over successful results that have it (bool as
    0/1), rounded to 4 places; average_score is the mean of the (mostly dummy) scores."""
    ok = [r for r in results if r.error is None]
    fields: dict[str, list[float]] = {}
    for r in ok:
        for k, v in r.details.items():
            if isinstance(v, (bool, int, float)) and not (isinstance(v, float) and math.isnan(v)):
                fields.setdefault(k, []).append(float(v))
    return {
        "sub_scores": {k: round(sum(v) / len(v), 4) for k, v in fields.items()},
        "average_score": round(sum(r.score for r in ok) / len(ok), 4) if ok else 0.0,
        "total": len(results),
        "successful": len(ok),
    }


def _row(label: str, rs: list[EpisodeResult], prefix: str) -> list[Any]:
    return [label] + [mean_of(r.scores.get(prefix + m) for r in rs) for m in COLUMNS]


def mobility_tables(results: list[EpisodeResult], label: str) -> list[Table]:
    """MobilityBench's tables: the layout of the paper's Table 2 once per metric mode (the main mode first), then by
    intent family, by scenario, efficiency, and the outcomes that did not pass. A long table on purpose: a list of
    table definitions (titles, columns, rows, notes) in the order the report prints them."""
    if not results:
        return []
    mode = results[0].tags.get("mode", "paper")
    sim_names = sorted({r.tags.get("similarity_model", "?") for r in results})
    langs = sorted({r.tags.get("lang", "en") for r in results})
    by_fw: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_fw[r.tags.get("framework", "react")].append(r)
    fw_name = {"react": "ReAct", "plan": "Plan-and-Execute"}
    note_common = (
        "Rates are fractions (the paper prints percentages); "
        "IT/OT are mean tokens per episode. A blank cell: the metric applies to no episode here."
    )
    if "en" in langs:
        note_common += " Reference-mode keyword rules on English data use the rig's English translation."
    tables = []
    for m in (mode, *[x for x in M.MODES if x != mode]):
        rows = []
        for fw in ("react", "plan"):
            rs = by_fw.get(fw, [])
            if rs:
                rows.append(_row(f"{label} ({fw_name[fw]})", rs, f"{m}:"))
        extra = (
            " Reference mode: cases missing from a metric's table are dropped (not 0); Plan-and-Execute tool "
            "calls are captured cumulatively; FPR for route scenarios is 'gave a route index'."
            if m == "reference"
            else " Paper mode: every episode counts; DEC/TS/SC with nothing produced score 0; FPR checks the route "
            "call, the chosen plan and the stated numbers against the sandbox's answers."
        )
        sim_note = f"Similarity model: {', '.join(sim_names)}. {note_common}"
        if m == "reference":  # results stored before reference mode had its own similarity used the paper's
            ref_names = sorted(
                {r.tags.get("reference_similarity_model") or r.tags.get("similarity_model", "?") for r in results}
            )
            sim_note = (
                f"Similarity model (the reference's: Jaccard unless a model directory): "
                f"{', '.join(ref_names)}. {note_common}"
            )
        tables.append(
            Table(
                title=f"MobilityBench, {m} metric mode (layout of the paper's Table 2)",
                columns=["Model", *COLUMNS],
                rows=rows,
                note=f"Mode: {m}{' (main)' if m == mode else ''}. {sim_note}{extra}",
            )
        )

    def by_tag(tag: str, values: Iterable[str], keys: Iterable[str], episodes: bool) -> list[list[Any]]:
        """A row per framework and tag value: how many episodes (or runs) and the mean of each score in keys."""
        rows = []
        for fw, rs in by_fw.items():
            for v in values:
                sub = [r for r in rs if r.tags.get(tag) == v]
                if sub:
                    n = len({r.episode_id for r in sub}) if episodes else len(sub)
                    rows.append([fw_name.get(fw, fw), v, n, *(mean_of(r.scores.get(k) for r in sub) for k in keys)])
        return rows

    tables.append(
        Table(
            title=f"MobilityBench by intent family ({mode} mode)",
            columns=["Framework", "Intent family", "Episodes", *COLUMNS],
            rows=by_tag("family", FAMILIES, COLUMNS, episodes=True),
            note="Families as in the paper (sec. 3.1.2).",
        )
    )
    tables.append(
        Table(
            title=f"MobilityBench by scenario ({mode} mode)",
            columns=["Framework", "Scenario", "Runs", "DR", "FPR"],
            rows=by_tag("scenario", SCENARIOS, ("DR", "FPR"), episodes=False),
        )
    )
    tables.append(_efficiency_table(results, fw_name))
    fails: dict[tuple[str, str], int] = defaultdict(int)
    for r in results:
        if r.error_category:
            fails[(r.tags.get("framework", ""), r.error_category)] += 1
    tables.append(
        Table(
            title="MobilityBench outcomes that did not pass",
            columns=["Framework", "Reason", "Runs"],
            rows=[[fw_name.get(f, f), why, n] for (f, why), n in sorted(fails.items())],
            note="engine_error: the engine failed (status failed); max_steps / format_errors / no_plan: "
            "the agent ran out of budget or never produced valid calls; not_delivered: no final "
            "answer grounded in successful tool calls; wrong_answer: delivered but FPR 0.",
        )
    )
    return tables


def _efficiency_table(results: list[EpisodeResult], fw_name: dict[str, str]) -> Table:
    rows = []
    by_fw: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_fw[r.tags.get("framework", "")].append(r)
    for fw, rs in by_fw.items():
        it = [v for r in rs if (v := r.scores.get("paper:IT")) is not None]
        ot = [v for r in rs if (v := r.scores.get("paper:OT")) is not None]
        lat = [
            sum(g.timings.e2e_s for g in r.generations if g.timings.e2e_s is not None)
            for r in rs
            if any(g.timings.e2e_s is not None for g in r.generations)
        ]
        calls = [len(r.generations) for r in rs]
        tools = [sum(1 for t in r.tool_calls if t.name != "final_answer") for r in rs]
        rows.append(
            [
                fw_name.get(fw, fw),
                len(rs),
                mean(it) if it else None,
                median(it) if it else None,
                mean(ot) if ot else None,
                median(ot) if ot else None,
                mean(lat) if lat else None,
                median(lat) if lat else None,
                mean(calls),
                mean(tools),
            ]
        )
    return Table(
        title="MobilityBench tokens and latency per episode",
        columns=[
            "Framework",
            "Runs",
            "IT mean",
            "IT median",
            "OT mean",
            "OT median",
            "Model time s mean",
            "Model time s median",
            "Model calls",
            "Tool calls",
        ],
        rows=rows,
        note="Tokens as the engine reports them; model time is the sum of the episode's generation "
        "end-to-end times (tool time excluded). Blank: the engine did not report it.",
    )
