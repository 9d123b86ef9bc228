"""Consistency over repeats: pass@k and pass^k from n trials of each episode, with bootstrap CIs over episodes.

pass@k (HumanEval, Chen et al. 2021): the chance that at least one of k trials drawn without replacement from an
episode's n succeeds, 1 - C(n-c, k) / C(n, k). pass^k (tau-bench, Yao et al. 2024): the chance that all k succeed,
C(c, k) / C(n, k). Both are unbiased over the n trials an episode has, and averaged over episodes; the interval
resamples episodes (the trials of one episode are not independent draws of the run's population).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import comb

from rig.scoring.stats import mean_ci, paired_diff_ci

__all__ = ["episode_counts", "estimate", "paired_difference", "pass_at_k", "pass_hat_k", "per_episode"]

Counts = dict[str, tuple[int, int]]  # episode id -> (trials n, successes c)


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"successes {c} out of range for {n} trials")
    if not 1 <= k <= n:
        raise ValueError(f"k = {k} needs 1 <= k <= n = {n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """At least one success among k of the n trials (unbiased, without replacement)."""
    _check(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Every one of k of the n trials a success (unbiased, without replacement)."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def episode_counts(outcomes: Iterable[tuple[str, bool]]) -> Counts:
    """(episode id, success) per trial -> (n, c) per episode."""
    out: dict[str, list[int]] = {}
    for episode, ok in outcomes:
        n_c = out.setdefault(episode, [0, 0])
        n_c[0] += 1
        n_c[1] += bool(ok)
    return {e: (n, c) for e, (n, c) in out.items()}


def per_episode(counts: Counts, k: int, metric: str) -> dict[str, float]:
    """Each episode's estimate (``metric`` "pass^k" or "pass@k"); episodes with fewer than k trials are left out."""
    fn = pass_hat_k if metric == "pass^k" else pass_at_k
    return {e: fn(n, c, k) for e, (n, c) in counts.items() if n >= k}


def estimate(values: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-episode estimates with a 95% percentile-bootstrap CI over episodes."""
    return mean_ci(values, seed=seed)


def paired_difference(a: dict[str, float], b: dict[str, float], seed: int = 0) -> tuple[int, float, float, float]:
    """(episodes paired, mean of b - a, low, high) over the episodes both have; ValueError when none."""
    common = sorted(set(a) & set(b))
    mean, low, high = paired_diff_ci([a[e] for e in common], [b[e] for e in common], seed=seed)
    return len(common), mean, low, high
