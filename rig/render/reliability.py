"""A run's reliability as tables: pass^k and pass@k with their CIs, and the failure taxonomy (class, then the
benchmark's own reasons), rendered from the `RunSummary` for report.md, report.html and the one screen."""

from __future__ import annotations

from typing import Any

from rig.benchmarks.base import Table
from rig.runfolder.summary import Reliability, RunSummary
from rig.scoring.taxonomy import MEANING

NM = "not measured"


def _ci(mean: float, low: float, high: float) -> str:
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def pass_k_table(s: RunSummary) -> Table | None:
    """pass^k and pass@k per k; "not measured" with the reason, never a 0, for the k that were not."""
    r = s.reliability
    if r is None:
        return None
    rows: list[list[Any]] = [
        [
            f"k = {p.k}",
            p.episodes,
            _ci(p.pass_hat, p.pass_hat_low, p.pass_hat_high),
            _ci(p.pass_at, p.pass_at_low, p.pass_at_high),
        ]
        for p in r.rows
    ]
    measured = {p.k for p in r.rows}
    rows += [[f"k = {k}", "–", NM, NM] for k in r.ks if k not in measured]
    sampled = "" if r.temperature is None else f" at temperature {r.temperature:g}"
    note = f"n = {r.repeats} repeats per episode{sampled}; success: {r.success}. Unbiased estimators over the n "
    note += "trials of each episode (pass^k as in tau-bench, pass@k as in HumanEval), 95% bootstrap CI over episodes"
    if r.reason:
        note += f". {r.reason[0].upper()}{r.reason[1:]}"
    return Table(
        title="Reliability over repeats: pass^k and pass@k",
        columns=["k", "Episodes", "pass^k (95% CI)", "pass@k (95% CI)"],
        rows=rows,
        note=note,
    )


def failure_table(s: RunSummary) -> Table | None:
    """The primary class of each episode that did not succeed, with the benchmark's own reasons beside it."""
    f = s.failures
    if f is None:
        return None
    classes = f.classes()
    rows: list[list[Any]] = [
        [c, n, f"{n / f.trials:.1%}", ", ".join(f"{d} ({m})" for d, m in f.details(c).items())]
        for c, n in classes.items()
    ]
    note = f"{len(f.failures)} of {f.trials} episodes did not succeed; each has one class: " + "; ".join(
        f"{c}: {MEANING[c]}" for c in classes
    )
    if f.unmapped():
        note += f". Reasons the benchmark does not map (counted as other): {', '.join(f.unmapped())}"
    return Table(
        title="Failure taxonomy", columns=["Class", "Episodes", "Share", "Benchmark's reasons"], rows=rows, note=note
    )


def screen_pass_k(r: Reliability | None) -> str | None:
    """The largest measured k > 1 for the one screen (``pass^3 0.40 [0.21, 0.60]``); None when there is none."""
    if r is None:
        return None
    wide = [p for p in r.rows if p.k > 1]
    if not wide:
        return None
    p = wide[-1]
    return f"pass^{p.k} {_ci(p.pass_hat, p.pass_hat_low, p.pass_hat_high)}"
