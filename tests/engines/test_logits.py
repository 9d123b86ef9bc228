"""The top-k lower bound of rig.engines.logits on synthetic distributions (no model): never above the full KL
divergence, equal to it when k is the vocabulary, whichever side is top-k; top-1 and target log-probs exact."""

from __future__ import annotations

import numpy as np
import pytest

from rig.engines.logits import (
    REST_FLOOR,
    TopK,
    coarse_kld,
    compare,
    compare_one,
    compare_variants,
    log_softmax,
    truncate,
)


def _pair(rng: np.random.Generator, vocab: int, spread: float) -> tuple[np.ndarray, np.ndarray]:
    """A peaked logit row (Zipf-like, as a language model's) and a perturbation of it."""
    ref = -spread * np.log1p(rng.permutation(vocab)).astype(np.float32) + rng.normal(0, 0.3, vocab).astype(np.float32)
    var = ref + rng.normal(0, 0.5, vocab).astype(np.float32)
    return ref, var


def _full_kld(r: np.ndarray, v: np.ndarray) -> float:
    lr, lv = log_softmax(r), log_softmax(v)
    return float(np.dot(np.exp(lr), lr - lv))


@pytest.mark.parametrize("spread", [0.5, 1.5, 4.0])
def test_top_k_never_exceeds_the_full_kld(spread: float) -> None:
    rng = np.random.default_rng(7)
    vocab = 2000
    for _ in range(40):
        r, v = _pair(rng, vocab, spread)
        target = int(rng.integers(vocab))
        full = _full_kld(r, v)
        previous = 0.0
        for k in (1, 5, 20, 200, 1000):
            # either side top-k, or both (the known set is then their intersection)
            for ref_row, var_row in (
                (r, truncate(v, k, target)),
                (truncate(r, k, target), v),
                (truncate(r, k, target), truncate(v, k, target)),
            ):
                kld, agree, lr, lv = compare_one(ref_row, var_row, target)
                assert kld <= full + 1e-9, (k, kld, full)
                assert agree == (int(np.argmax(r)) == int(np.argmax(v)))
                assert lr == pytest.approx(log_softmax(r)[target], abs=1e-12)
                assert lv == pytest.approx(log_softmax(v)[target], abs=1e-12)
            # a larger known set (variant top-k against the full reference) gives a tighter bound, as long as the
            # variant's remainder is above the floor (flooring it lowers the value, which keeps it a lower bound)
            cut = truncate(v, k, target)
            kld = compare_one(r, cut, target)[0]
            if 1 - np.exp(cut.logprobs).sum() > REST_FLOOR:
                assert kld >= previous - 1e-12
            previous = kld


def test_k_equal_to_the_vocabulary_is_exact() -> None:
    rng = np.random.default_rng(3)
    vocab = 500
    for spread in (0.5, 2.0):
        r, v = _pair(rng, vocab, spread)
        full = _full_kld(r, v)
        for ref_row, var_row in ((r, truncate(v, vocab, 0)), (truncate(r, vocab, 0), truncate(v, vocab, 0))):
            assert compare_one(ref_row, var_row, 0)[0] == pytest.approx(full, rel=1e-9, abs=1e-12)


def test_the_bound_is_tight_where_the_top_k_hold_the_mass() -> None:
    """A peaked pair: the rest bucket is small on both sides and the bound is close to the full value; on a flat
    pair the same k leaves most of the divergence in the bucket."""
    rng = np.random.default_rng(11)
    peaked = _pair(rng, 4000, 6.0)
    flat = _pair(rng, 4000, 0.2)
    gap_peaked = _full_kld(*peaked) - compare_one(peaked[0], truncate(peaked[1], 20, 0), 0)[0]
    gap_flat = _full_kld(*flat) - compare_one(flat[0], truncate(flat[1], 20, 0), 0)[0]
    assert 0 <= gap_peaked < 0.05 * _full_kld(*peaked)
    assert gap_flat > 0.5 * _full_kld(*flat)


def test_identical_rows_give_zero() -> None:
    rng = np.random.default_rng(5)
    r, _ = _pair(rng, 1000, 1.0)
    a, b = truncate(r, 20, 999), truncate(r, 20, 999)
    assert compare_one(a, b, 999) == (0.0, True, a.logprob(999), a.logprob(999))
    assert compare_one(r, a, 999)[0] == 0.0


def test_rest_masses_at_rounding_level_stay_finite() -> None:
    """Top-k log-probs that sum past 1 by float32 rounding (or leave nothing) give a finite, non-negative value."""
    lp = np.log(np.array([0.7, 0.3000004]))
    other = np.log(np.array([0.6, 0.4]))
    for a, b in ((lp, other), (other, lp), (lp, lp)):
        kld = coarse_kld(a, b)
        assert np.isfinite(kld) and kld >= 0
    assert coarse_kld(lp, lp) == 0.0


def test_top_k_rows_holding_the_whole_vocabulary_give_the_full_row_results() -> None:
    rng = np.random.default_rng(1)
    rows = [_pair(rng, 300, 1.0) for _ in range(6)]
    ref = np.stack([a for a, _ in rows])
    var = np.stack([b for _, b in rows])
    targets = [int(t) for t in rng.integers(300, size=6)]
    mixed = compare(ref, [truncate(x, 300, t) for x, t in zip(var, targets, strict=True)], targets)
    for (k1, a1, r1, v1), (k2, a2, r2, v2) in zip(mixed, compare(ref, var, targets), strict=True):
        assert k1 == pytest.approx(k2, rel=1e-9, abs=1e-12) and a1 == a2
        assert r1 == pytest.approx(r2) and v1 == pytest.approx(v2)


def test_chunk_comparison_matches_numpy_for_several_variants() -> None:
    rng = np.random.default_rng(7)
    vocab = 4096
    ref = (rng.standard_normal((5, vocab)) * 4).astype(np.float32)
    near = ref + (rng.standard_normal((5, vocab)) * 0.05).astype(np.float32)
    far = ref + (rng.standard_normal((5, vocab)) * 2).astype(np.float32)
    targets = [int(t) for t in rng.integers(0, vocab, 5)]
    per_row = [compare_variants(ref[i], [ref[i].copy(), near[i], far[i]], t) for i, t in enumerate(targets)]
    same, a, b = ([row[k] for row in per_row] for k in range(3))
    assert [x[0] for x in same] == [0.0] * 5 and all(x[1] for x in same)
    assert [x[2] for x in same] == [x[3] for x in same]
    assert a == compare(ref, near, targets) and b == compare(ref, far, targets)
    for got, var in ((a, near), (b, far)):
        lp = [x.astype(np.float64) for x in (ref, var)]
        lp = [x - x.max(1, keepdims=True) for x in lp]
        lp = [x - np.log(np.exp(x).sum(1, keepdims=True)) for x in lp]
        kld = (np.exp(lp[0]) * (lp[0] - lp[1])).sum(1)
        rows = np.arange(5)
        assert np.allclose([x[0] for x in got], kld, rtol=1e-9, atol=1e-12)
        assert [x[1] for x in got] == list(ref.argmax(1) == var.argmax(1))
        assert np.allclose([x[2] for x in got], lp[0][rows, targets], rtol=1e-12)
        assert np.allclose([x[3] for x in got], lp[1][rows, targets], rtol=1e-12)
    assert 0 < np.mean([x[0] for x in a]) < np.mean([x[0] for x in b])


def test_top_k_record() -> None:
    t = TopK(ids=np.array([4, 2, 9]), logprobs=np.array([-0.1, -2.0, -7.0]), k=2)
    assert t.logprob(9) == -7.0 and np.isnan(t.logprob(1))


def test_vocab_digest_reads_the_space_mark_as_a_space() -> None:
    """A GGUF's whitespace-run tokens as spaces and a converted tokenizer's as SentencePiece marks digest alike; any
    other difference in an entry, the BOS id or the size does not."""
    from rig.engines.logits import vocab_digest

    gguf = [b"<pad>", b"  ", "\u2581the".encode()]
    hf = [b"<pad>", "\u2581\u2581".encode(), "\u2581the".encode()]
    assert vocab_digest(3, 2, gguf) == vocab_digest(3, 2, hf)
    assert vocab_digest(3, 2, gguf) != vocab_digest(3, 2, [b"<pad>", b"  ", "\u2581thE".encode()])
    assert vocab_digest(3, 2, gguf) != vocab_digest(3, 1, gguf)
    assert vocab_digest(3, 2, gguf) != vocab_digest(4, 2, gguf)


def test_tied_top_tokens_agree_whichever_an_engine_ranks_first() -> None:
    """bf16 logits tie: a top-k engine may rank either tied token first, an argmax takes the lowest id."""
    r = np.array([0.0, 3.0, 3.0, 1.0], dtype=np.float32)
    v = np.array([0.0, 2.0, 3.0, 1.0], dtype=np.float32)
    lp = log_softmax(r)
    ranked_second_first = TopK(ids=np.array([2, 1]), logprobs=lp[[2, 1]], k=2)
    assert compare_one(r, v, 2)[1] and compare_one(ranked_second_first, v, 2)[1]
    assert not compare_one(r, np.array([0.0, 2.0, 1.0, 3.0], dtype=np.float32), 2)[1]
