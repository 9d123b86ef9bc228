"""Bootstrap CIs and percentiles."""

from __future__ import annotations

import numpy as np
import pytest

from rig.scoring.stats import mean_ci, paired_diff_ci, percentile


def _binary(n: int, p: float, seed: int) -> list[float]:
    return (np.random.default_rng(seed).random(n) < p).astype(float).tolist()


def test_mean_ci_deterministic_and_contains_mean() -> None:
    values = _binary(200, 0.6, seed=1)
    first = mean_ci(values, n_boot=500, seed=7)
    assert first == mean_ci(values, n_boot=500, seed=7)
    assert first != mean_ci(values, n_boot=500, seed=8)
    mean, low, high = first
    assert mean == pytest.approx(float(np.mean(values)))
    assert low <= mean <= high
    assert low < high


def test_mean_ci_narrows_with_more_samples() -> None:
    _, lo_s, hi_s = mean_ci(_binary(50, 0.5, seed=2), n_boot=500)
    _, lo_l, hi_l = mean_ci(_binary(2000, 0.5, seed=3), n_boot=500)
    assert (hi_l - lo_l) < (hi_s - lo_s) / 3


def test_mean_ci_alpha_widens() -> None:
    values = _binary(100, 0.5, seed=4)
    _, lo95, hi95 = mean_ci(values, n_boot=500, alpha=0.05)
    _, lo50, hi50 = mean_ci(values, n_boot=500, alpha=0.5)
    assert hi95 - lo95 > hi50 - lo50


def test_mean_ci_edges() -> None:
    with pytest.raises(ValueError):
        mean_ci([])
    with pytest.raises(ValueError):
        mean_ci([1.0, float("nan")])
    with pytest.raises(ValueError):
        mean_ci([1.0, 0.0], alpha=0.0)
    assert mean_ci([0.25]) == (0.25, 0.25, 0.25)
    assert mean_ci([1.0] * 10) == (1.0, 1.0, 1.0)


def test_paired_diff_ci() -> None:
    a = _binary(300, 0.4, seed=5)
    b = [1.0 if (x == 1.0 or i % 5 == 0) else 0.0 for i, x in enumerate(a)]
    diff, low, high = paired_diff_ci(a, b, n_boot=500)
    assert diff == pytest.approx(float(np.mean(np.array(b) - np.array(a))))
    assert 0.0 < low <= diff <= high
    assert paired_diff_ci(a, b, n_boot=500) == (diff, low, high)
    assert paired_diff_ci(a, a) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        paired_diff_ci([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_diff_ci([], [])


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 90) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(range(101), 95) == pytest.approx(95.0)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
