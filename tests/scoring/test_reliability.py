"""pass@k and pass^k against brute-force enumeration of every k-subset of an episode's n trials."""

from __future__ import annotations

from itertools import combinations

import pytest

from rig.scoring.reliability import episode_counts, estimate, paired_difference, pass_at_k, pass_hat_k, per_episode


def _brute(n: int, c: int, k: int) -> tuple[float, float]:
    """(pass^k, pass@k) as the share of the C(n, k) subsets of k trials where all / at least one succeed."""
    trials = [True] * c + [False] * (n - c)
    subsets = list(combinations(trials, k))
    return sum(all(s) for s in subsets) / len(subsets), sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 8))
def test_estimators_equal_enumeration_for_every_c_and_k(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            hat, at = _brute(n, c, k)
            assert pass_hat_k(n, c, k) == pytest.approx(hat, abs=1e-12), (n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(at, abs=1e-12), (n, c, k)


def test_edges_k_equal_n_all_fail_all_pass() -> None:
    assert pass_hat_k(5, 5, 5) == 1.0 and pass_at_k(5, 5, 5) == 1.0  # all pass
    assert pass_hat_k(5, 0, 1) == 0.0 and pass_at_k(5, 0, 5) == 0.0  # all fail
    assert pass_hat_k(5, 4, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0  # k = n: every trial / any trial
    assert pass_hat_k(4, 2, 1) == pass_at_k(4, 2, 1) == 0.5  # k = 1 is the success rate either way


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 1, 0), (3, 4, 1), (3, -1, 1)])
def test_out_of_range_is_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_average_over_episodes_with_a_bootstrap_ci_over_episodes() -> None:
    counts = episode_counts([("a", True), ("a", True), ("a", False), ("b", False), ("b", False), ("b", False)])
    assert counts == {"a": (3, 2), "b": (3, 0)}
    values = per_episode(counts, 2, "pass^k")
    assert values == {"a": pytest.approx(1 / 3), "b": 0.0}
    mean, low, high = estimate(list(values.values()))
    assert mean == pytest.approx(1 / 6) and low <= mean <= high and low >= 0.0
    assert per_episode({"a": (1, 1)}, 2, "pass@k") == {}  # fewer trials than k: left out, not scored 0
    n, diff, lo, hi = paired_difference({"a": 1.0, "b": 0.5, "c": 0.0}, {"a": 0.0, "b": 0.5})
    assert n == 2 and diff == pytest.approx(-0.5) and lo <= diff <= hi
