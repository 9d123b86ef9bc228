"""CallNavi's report tables from stored results only: Table 4 per metric mode (with the paper's denominators when
asked), where the two modes differ, bootstrap CIs, per domain, stability over repeats, failure reasons."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any

from rig.benchmarks.base import Table
from rig.benchmarks.callnavi import data as D
from rig.benchmarks.callnavi.scoring import MODES
from rig.records import EpisodeResult
from rig.scoring.stability import LEV_MAX_CHARS, election_stability, levenshtein_stability

# The paper's Table 2 counts; its scripts divide by these. The current files hold 456/187/86.
PAPER_DENOMINATORS = {"easy": 456, "medium": 188, "hard": 85, "all": 729}


def scored_mode(results: list[EpisodeResult]) -> str:
    """Which mode scored these results (results stored before modes existed were paper mode)."""
    modes = {r.tags.get("mode", "paper") for r in results}
    return modes.pop() if len(modes) == 1 else "mixed (" + ", ".join(sorted(modes)) + ")"


def _rate(rs: list[EpisodeResult], key: str, denom: int | None = None) -> float | None:
    vals = [r.scores.get(key) or 0.0 for r in rs]
    if denom is None:
        return mean(vals) if vals else None
    return sum(vals) / denom if denom else None


T4_COLUMNS = [
    "Model",
    "Routing Easy",
    "Routing Medium",
    "Routing Hard",
    "Routing All",
    "Syntax Validity",
    "Structural Accuracy",
    "AST Easy",
    "AST Medium",
    "AST Hard",
    "AST All Avg",
    "AST Macro Avg",
]
# The metrics both modes compute, as the "where the two modes differ" table names them.
BOTH_METRICS = (
    ("Routing", "routing"),
    ("Syntax Validity", "syntax"),
    ("Structural Accuracy", "structure"),
    ("AST", "ast"),
    ("API order", "order"),
)
NOT_JSON = "Not measured: the judge scripts read JSON answers; these answers are YAML."
REFERENCE_READS = (
    "Reference mode reads the raw reply as the public judge scripts do, with no GPT repair. Routing: the text with "
    "quotes, brackets, spaces, backticks, backslashes and newlines deleted, lower-cased, equals the ground truth's "
    "(a json-tagged code fence leaves 'json' and fails; a space inside an API name is deleted and passes; CRLF line "
    "ends keep their carriage returns and fail). Parameters: every single quote swapped for a double one, only the "
    "json-tagged and bare fences dropped, then json.loads (an apostrophe inside a JSON string, or another fence, is a "
    "syntax failure; a list or a number parses), compared with Python's own == and in (a string entry in "
    "'parameters' is a substring test; where the upstream script would stop, reference_crash). Rules and examples: "
    "benchmarks/callnavi/README.md."
)


def _task_split(results: list[EpisodeResult]) -> tuple[list[EpisodeResult], list[EpisodeResult]]:
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_task[r.tags.get("task", "params")].append(r)
    return by_task.get("routing", []), by_task.get("params", [])


def _has_mode(r: EpisodeResult, mode: str) -> bool:
    return any(k.startswith(mode + ":") for k in r.scores)


def _table4_row(
    results: list[EpisodeResult], label: str, prefix: str, paper_denominators: bool, repeats: int
) -> list[Any]:
    """One row in the paper's Table 4 layout from the scores under ``prefix`` ("" for the main mode's keys)."""
    routing, params = _task_split(results)

    def split(rs: list[EpisodeResult], diff: str) -> list[EpisodeResult]:
        return [r for r in rs if r.tags.get("difficulty") == diff]

    def denom(diff: str) -> int | None:
        return PAPER_DENOMINATORS[diff] * repeats if paper_denominators else None

    row: list[Any] = [label or "model"]
    for diff in D.DIFFICULTIES:
        row.append(_rate(split(routing, diff), prefix + "routing", denom(diff)))
    row.append(_rate(routing, prefix + "routing", denom("all")))
    row.append(_rate(params, prefix + "syntax", denom("all")))
    row.append(_rate(params, prefix + "structure", denom("all")))
    per_diff = [_rate(split(params, d), prefix + "ast", denom(d)) for d in D.DIFFICULTIES]
    row += per_diff
    row.append(_rate(params, prefix + "ast", denom("all")))
    present = [x for x in per_diff if x is not None]
    row.append(mean(present) if len(present) == 3 else None)
    return row


def _ceiling_note(results: list[EpisodeResult]) -> str:
    """Under a grammar, the gold answers outside it (its bounds: calls, keys, value lengths) and the ceiling that puts
    on each task's score; "" when every gold answer was inside, or the run was not constrained."""
    out = []
    for task in D.TASKS:
        judged = [r for r in results if r.tags.get("task") == task and r.tags.get("gold_admitted") in ("yes", "no")]
        outside = sum(r.tags["gold_admitted"] == "no" for r in judged)
        if outside:
            metric = "routing EM" if task == "routing" else "AST, structure and order"
            out.append(
                f" Ceiling: {outside} of {len(judged)} {task} gold answers lie outside the answer grammar's bounds, so "
                f"{metric} cannot exceed {(len(judged) - outside) / len(judged):.3f} under --decode here."
            )
    return "".join(out)


def callnavi_tables(
    results: list[EpisodeResult], label: str = "", paper_denominators: bool = False, fmt: str = "json"
) -> list[Table]:
    """Table 4 in the main mode (the plain keys), then in the other mode (its ``<mode>:`` keys) and where the two
    differ; results stored before both modes were scored show the main mode only, and say so."""
    routing, params = _task_split(results)
    repeats = max((r.repeat for r in results), default=0) + 1
    counts = {
        d: len({r.tags.get("question") for r in results if r.tags.get("difficulty") == d}) for d in D.DIFFICULTIES
    }
    failed = sum(r.status == "failed" for r in results)
    common = (
        f"Questions per difficulty: easy {counts['easy']}, medium {counts['medium']}, hard {counts['hard']}; "
        f"repeats {repeats}. Rates use {'the paper' if paper_denominators else 'the data'}'s denominators. "
        "Syntax validity is strict (no LLM repair). A blank cell means the task was not run."
    )
    if failed:
        common += f" {failed} episode(s) failed in the engine and count as wrong."
    common += _ceiling_note(results)
    mode = scored_mode(results)
    both_scored = any(_has_mode(r, m) for r in results for m in MODES)
    others = [m for m in MODES if m != mode] if both_scored else []
    note = f"Scored in {mode} mode. {common}"
    if others:
        tables_word = "table follows" if len(others) == 1 else "tables follow"
        note += f" Main mode; the {' and '.join(others)} mode {tables_word}."
    elif results:
        note += (
            " Only this mode was scored: these results were stored before rig scored both modes (a new run, or "
            "`rig rescore` on the output files, shows both)."
        )
    t4 = Table(
        title=f"CallNavi (layout of the paper's Table 4), {mode} mode{' (main)' if others else ''}",
        columns=T4_COLUMNS,
        rows=[_table4_row(results, label, "", paper_denominators, repeats)],
        note=note,
    )
    tables = [t4]
    for m in others:
        covered = [r for r in results if _has_mode(r, m)]
        if covered:
            row = _table4_row(covered, label, f"{m}:", paper_denominators, repeats)
            other_note = f"Scored in {m} mode, from the same replies as the main table ({mode} mode). {common}"
            if len(covered) < len(results):
                other_note += (
                    f" {len(results) - len(covered)} episode(s) stored before rig scored both modes are left out."
                )
        else:
            row = [label or "model"] + [None] * (len(T4_COLUMNS) - 1)
            other_note = NOT_JSON if m == "reference" and fmt == "yaml" else f"Not measured: no {m}-mode scores."
        tables.append(
            Table(
                title=f"CallNavi (layout of the paper's Table 4), {m} mode",
                columns=T4_COLUMNS,
                rows=[row],
                note=other_note,
            )
        )
    if others:
        tables.append(_differ_table(results, label, fmt))
    tables.append(_ci_table(routing, params, label))
    if repeats > 1:
        tables.append(stability_table(results, label))
    tables.append(_domain_table(params, routing))
    tables.append(_failure_table(results))
    return tables


def _differ_table(results: list[EpisodeResult], label: str, fmt: str) -> Table:
    """Per metric both modes compute: each mode's mean over the episodes scored in both, and how many differ."""
    rows = []
    for name, key in BOTH_METRICS:
        pairs = [
            (p, q)
            for r in results
            if (p := r.scores.get(f"paper:{key}")) is not None and (q := r.scores.get(f"reference:{key}")) is not None
        ]
        if pairs:
            rows.append(
                [
                    label or "model",
                    name,
                    len(pairs),
                    mean(p for p, _ in pairs),
                    mean(q for _, q in pairs),
                    sum(p != q for p, q in pairs),
                    sum(p > q for p, q in pairs),
                    sum(q > p for p, q in pairs),
                ]
            )
    note = (
        "Per metric, the mean in each mode over the episodes scored in both, and how many episodes score "
        f"differently (higher in paper mode, higher in reference mode). {REFERENCE_READS}"
    )
    return Table(
        title="CallNavi: where the two modes differ",
        columns=["Model", "Metric", "Episodes", "Paper", "Reference", "Differ", "Paper higher", "Reference higher"],
        rows=rows,
        note=note if rows or fmt != "yaml" else NOT_JSON,
    )


def _ci_table(routing: list[EpisodeResult], params: list[EpisodeResult], label: str) -> Table:
    from rig.scoring.stats import mean_ci

    rows = []
    for name, rs, key in (
        ("Routing All", routing, "routing"),
        ("Syntax Validity", params, "syntax"),
        ("Structural Accuracy", params, "structure"),
        ("AST All Avg", params, "ast"),
    ):
        vals = [r.scores.get(key) or 0.0 for r in rs]
        if len(vals) >= 2:
            m, lo, hi = mean_ci(vals)
            rows.append([label or "model", name, len(vals), m, lo, hi])
    return Table(
        title="CallNavi rates with 95% bootstrap confidence intervals",
        columns=["Model", "Measure", "Episodes", "Rate", "CI low", "CI high"],
        rows=rows,
        note="Percentile bootstrap over episodes (2,000 resamples, seed 0).",
    )


def stability_table(results: list[EpisodeResult], label: str = "") -> Table:
    rows = []
    for task in D.TASKS:
        outs: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for r in results:
            if r.tags.get("task") == task and r.generations:
                outs[r.episode_id].append((r.repeat, r.generations[-1].text))
        if not outs:
            continue
        seqs = [[t for _, t in sorted(v)] for v in outs.values()]
        rows.append(
            [
                label or "model",
                task,
                len(seqs),
                mean(election_stability(s) for s in seqs),
                mean(levenshtein_stability(s) for s in seqs),
            ]
        )
    return Table(
        title="CallNavi stability over repeats (paper sec. 5.3)",
        columns=["Model", "Task", "Questions", "Election stability", "Levenshtein stability"],
        rows=rows,
        note="Computed on raw outputs after the paper's normalisation (case, whitespace, formatting); the "
        f"Levenshtein score compares the first {LEV_MAX_CHARS:,} characters of each normalised output (answers "
        "are far shorter; the cap bounds the quadratic edit distance on runaway replies).",
    )


def _domain_table(params: list[EpisodeResult], routing: list[EpisodeResult]) -> Table:
    doms = sorted(
        {r.tags.get("domain", "") for r in params + routing},
        key=lambda d: (d not in D.DOMAINS, D.DOMAINS.index(d) if d in D.DOMAINS else 0, d),
    )
    rows = []
    for d in doms:
        p = [r for r in params if r.tags.get("domain") == d]
        q = [r for r in routing if r.tags.get("domain") == d]
        rows.append(
            [
                d,
                len({r.tags.get("question") for r in p + q}),
                _rate(q, "routing"),
                _rate(p, "syntax"),
                _rate(p, "structure"),
                _rate(p, "ast"),
            ]
        )
    return Table(
        title="CallNavi by domain", columns=["Domain", "Questions", "Routing", "Syntax", "Structure", "AST"], rows=rows
    )


def _failure_table(results: list[EpisodeResult]) -> Table:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r in results:
        if r.error:
            counts[(r.tags.get("task", ""), r.error.split("\n")[0][:80])] += 1
    rows = [[t, reason, n] for (t, reason), n in sorted(counts.items(), key=lambda kv: -kv[1])[:15]]
    return Table(title="CallNavi failure reasons (top 15)", columns=["Task", "Reason", "Episodes"], rows=rows)
