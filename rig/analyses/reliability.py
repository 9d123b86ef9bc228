"""`rig compare`'s reliability section: pass^k per variant with its paired difference against the reference, the
failure taxonomy per variant, and the transitions between the reference's outcome and each variant's, per (episode,
repeat). Everything is read from each run's `RunSummary`; nothing is recomputed from scores."""

from __future__ import annotations

from typing import Any

from rig.benchmarks.base import Table
from rig.runfolder.summary import Reliability, RunSummary
from rig.scoring.reliability import paired_difference, per_episode

CORRECT = "correct"


def _ci(mean: float, low: float, high: float, sign: bool = False) -> str:
    f = "+.3f" if sign else ".3f"
    return f"{mean:{f}} [{low:{f}}, {high:{f}}]"


def pass_k_compare_table(sums: list[RunSummary], labels: list[str]) -> Table | None:
    """Per variant and k: pass^k with its CI, and the paired difference (variant - reference) over the episodes both
    have k trials of, with a bootstrap CI over episodes; "not measured" with the reason where a side is not."""
    ref = sums[0].reliability
    if ref is None:
        return None
    rows: list[list[Any]] = []
    reasons: dict[str, str] = {}
    ks = sorted({k for s in sums if s.reliability for k in s.reliability.ks})
    for s, label in zip(sums, labels, strict=True):
        r = s.reliability
        measured = {p.k: p for p in r.rows} if r else {}
        if r and r.reason:
            reasons[label] = r.reason
        for k in ks:
            p = measured.get(k)
            own = _ci(p.pass_hat, p.pass_hat_low, p.pass_hat_high) if p else "not measured"
            diff = "–" if s is sums[0] else _difference(ref, r, k)
            rows.append([label, f"k = {k}", p.episodes if p else "–", own, diff])
    note = f"pass^k: every one of k trials of an episode succeeds (success: {ref.success}); paired differences over "
    note += "episodes with k trials in both runs, 95% bootstrap CI over episodes"
    if reasons:
        note += ". " + "; ".join(f"{label}: {why}" for label, why in reasons.items())
    return Table(
        title=f"pass^k against {labels[0]}",
        columns=["Variant", "k", "Episodes", "pass^k (95% CI)", "Paired difference (95% CI)"],
        rows=rows,
        note=note,
    )


def _difference(ref: Reliability, r: Reliability | None, k: int) -> str:
    measured = {p.k for p in ref.rows} & ({p.k for p in r.rows} if r else set())
    if r is None or k not in measured:
        return "not measured"
    try:
        n, mean, low, high = paired_difference(per_episode(ref.counts, k, "pass^k"), per_episode(r.counts, k, "pass^k"))
    except ValueError:
        return "not measured (no common episode)"
    return f"{_ci(mean, low, high, sign=True)} over {n}"


def failure_compare_table(sums: list[RunSummary], labels: list[str]) -> Table | None:
    """Episodes per primary class of the shared taxonomy, one row per variant."""
    if any(s.failures is None for s in sums):
        return None
    counts = [s.failures.classes() if s.failures else {} for s in sums]
    classes = sorted({c for cs in counts for c in cs})
    rows: list[list[Any]] = [
        [label, s.failures.trials if s.failures else 0, *[cs.get(c, 0) for c in classes]]
        for s, label, cs in zip(sums, labels, counts, strict=True)
    ]
    return Table(title="Failure taxonomy per variant", columns=["Variant", "Episodes", *classes], rows=rows)


def transition_tables(sums: list[RunSummary], labels: list[str], keys: list[set[tuple[str, int]]]) -> list[Table]:
    """For each variant, the (episode, repeat) pairs whose outcome differs from the reference's: from correct to a
    class, from a class back to correct, or from one class to another. ``keys``: each run's stored results."""
    if any(s.failures is None for s in sums):
        return []
    ref_states = sums[0].failures.states() if sums[0].failures else {}
    out = []
    for s, label, own in list(zip(sums, labels, keys, strict=True))[1:]:
        states = s.failures.states() if s.failures else {}
        common = sorted(keys[0] & own)
        moves: dict[tuple[str, str], int] = {}
        for key in common:
            a, b = ref_states.get(key, CORRECT), states.get(key, CORRECT)
            if a != b:
                moves[(a, b)] = moves.get((a, b), 0) + 1
        rows: list[list[Any]] = [[a, b, n] for (a, b), n in sorted(moves.items(), key=lambda kv: (-kv[1], kv[0]))]
        out.append(
            Table(
                title=f"Transitions from {labels[0]} to {label}",
                columns=[f"From ({labels[0]})", f"To ({label})", "Episodes"],
                rows=rows,
                note=f"{sum(moves.values())} of {len(common)} paired (episode, repeat) results changed outcome; "
                "correct: a success, else the primary class of the failure taxonomy",
            )
        )
    return out
