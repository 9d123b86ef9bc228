"""Small statistics helpers for reporting: bootstrap CIs and percentiles.

Percentile bootstrap is used because per-item scores are mostly 0/1 and
bounded, where normal-approximation intervals misbehave for small n.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["mean_ci", "paired_diff_ci", "percentile", "ratio_ci"]

# Bound on resample indices materialised at once (~64 MB of int64).
_CHUNK_ELEMENTS = 8_000_000


def _as_finite_array(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name}: no values")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: values must be finite (no NaN/inf)")
    return arr


def _bootstrap_means(arr: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = arr.size
    rows = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(n_boot, dtype=float)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = arr[idx].mean(axis=1)
    return means


def mean_ci(
    values: Sequence[float],
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Return ``(mean, low, high)`` with a percentile-bootstrap (1 - alpha) CI.

    Deterministic for a given seed. Raises ``ValueError`` on empty input.
    """
    if n_boot < 1:
        raise ValueError("n_boot must be >= 1")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    arr = _as_finite_array(values, "mean_ci")
    mean = float(arr.mean())
    if arr.size == 1 or np.all(arr == arr[0]):
        return mean, mean, mean  # no sampling variability to resample
    means = _bootstrap_means(arr, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return mean, float(low), float(high)


def paired_diff_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of ``b - a`` over paired items with a bootstrap CI.

    Pairing (same items, two systems) removes between-item variance, giving a
    much tighter interval than comparing two independent CIs.
    """
    arr_a = _as_finite_array(a, "paired_diff_ci(a)")
    arr_b = _as_finite_array(b, "paired_diff_ci(b)")
    if arr_a.size != arr_b.size:
        raise ValueError(f"paired_diff_ci: lengths differ ({arr_a.size} vs {arr_b.size})")
    return mean_ci(arr_b - arr_a, n_boot=n_boot, alpha=alpha, seed=seed)


def ratio_ci(
    num: Sequence[float],
    den: Sequence[float],
    *,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float] | None:
    """``sum(num) / sum(den)`` over paired items (e.g. joules over correct answers) with a percentile-bootstrap CI
    that resamples the items; None when ``sum(den)`` is 0. Resamples whose denominator is 0 are left out (with few
    correct items the interval is then wide, as it should be)."""
    arr_n = _as_finite_array(num, "ratio_ci(num)")
    arr_d = _as_finite_array(den, "ratio_ci(den)")
    if arr_n.size != arr_d.size:
        raise ValueError(f"ratio_ci: lengths differ ({arr_n.size} vs {arr_d.size})")
    total = float(arr_d.sum())
    if total == 0:
        return None
    point = float(arr_n.sum()) / total
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr_n.size, size=(n_boot, arr_n.size))
    d = arr_d[idx].sum(axis=1)
    keep = d > 0
    ratios = arr_n[idx].sum(axis=1)[keep] / d[keep]
    if ratios.size == 0:
        return point, point, point
    low, high = np.quantile(ratios, [alpha / 2.0, 1.0 - alpha / 2.0])
    return point, float(low), float(high)


def percentile(values: Sequence[float], q: float) -> float | None:
    """q-th percentile (0..100, linear interpolation); ``None`` when empty.

    ``None`` rather than an exception so callers can print "not measured".
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError("q must be in [0, 100]")
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0:
        return None
    return float(np.percentile(arr, q))
