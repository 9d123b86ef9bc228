"""The teacher-forcing scorer: KV prefix reuse gives the rows a fresh prefill gives, bit for bit; the scoring order."""

from __future__ import annotations

import numpy as np
import pytest

from rig.engines.llamacpp_logits import prefix_order

API_LIST = "".join(
    f"- get{name}(city: str, day: int) -> dict: the {name.lower()} forecast of a city for a day, in SI units.\n"
    for name in ("Weather", "Wind", "Rain", "Snow", "Fog", "Sun", "Tide", "Pollen", "Uv", "Air", "Heat", "Frost") * 3
)


def _prompt(question: str) -> str:
    return (
        f"<start_of_turn>user\nAPI list start\n{API_LIST}API list end\n\nQuestion start\n{question}\n"
        "Question end<end_of_turn>\n<start_of_turn>model\n"
    )


@pytest.mark.model
def test_prefix_reuse_gives_the_rows_of_a_fresh_prefill(embedded_weights: str) -> None:
    """Prompts sharing a prefix longer than Gemma 3's 512-token sliding window, scored one after the other (each
    taking the shared prefix from the KV cache), get exactly the rows a scorer prefilling each from position 0
    computes. Exact, not a tolerance: llama.cpp's CPU kernels give a token different logits (up to ~1) when it moves
    between the 4-row groups and the tail of its batch, so reuse that changed a token's place in its batch, kept a
    stale position or decoded at wrong positions shows. The questions differ only near their end, so the part
    prefilled after the cached prefix is short (where batch lengths differ most). A fresh prompt is prefilled in
    batches of 512 (fewer decodes: each waits on its threads, which costs most on a shared host)."""
    from rig.engines.llamacpp_logits import LogitScorer

    reused, fresh = LogitScorer(embedded_weights, 2048, chunk=16), LogitScorer(embedded_weights, 2048, chunk=16)
    try:
        seqs = []
        for question, reply in (
            ("How windy is Turku?", '{"API": ["getWind"], "parameters": [{"city": "Turku"}]}'),
            ("How windy is Oulu?", '{"API": ["getWind"], "parameters": [{"city": "Oulu"}]}'),
            ("How windy is Oulu on Sunday?", '{"API": ["getWind"], "parameters": [{"city": "Oulu", "day": 6}]}'),
            ("How windy is Oulu harbour in the evening?", '{"API": ["getWind"], "parameters": [{}]}'),
        ):
            p = reused.tokenize(_prompt(question), add_bos=True, special=True)
            seqs.append((p + reused.tokenize(reply, add_bos=False, special=False), len(p)))
        shared = next(i for i, (a, b) in enumerate(zip(seqs[0][0], seqs[1][0], strict=False)) if a != b)
        assert shared > 512 + reused.block  # past the sliding window, and more than a block of it reusable

        for k, (seq, at) in enumerate(seqs):
            before = reused.stats.reused
            got = [(i, rows.copy()) for i, rows in reused.rows(seq, at)]
            if k:
                assert reused.stats.reused - before >= shared - reused.block  # the prefix came from the cache
            fresh.reset()
            d0 = fresh.stats.decodes
            want = [(i, rows.copy()) for i, rows in fresh.rows(seq, at)]
            assert fresh.stats.decodes - d0 == -(-(at - 1) // 512) + -(-(len(seq) - at) // 16)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert sum(len(r) for _, r in got) == len(seq) - at
            for (_, a), (_, b) in zip(got, want, strict=True):
                assert np.array_equal(a, b), f"sequence {k}"
        assert fresh.stats.reused == 0
    finally:
        reused.close()
        fresh.close()


def test_prefix_order_walks_the_prefix_tree() -> None:
    seqs = [[1, 2, 9], [3, 1], [1, 2, 3, 4], [1, 5], [3], [1, 2, 3]]
    order = prefix_order(seqs)
    assert [seqs[i] for i in order] == [[1, 2, 3], [1, 2, 3, 4], [1, 2, 9], [1, 5], [3], [3, 1]]

    def prefilled(ordered: list[list[int]]) -> int:  # positions evaluated with one cached sequence
        total, prev = 0, []
        for s in ordered:
            common = next((i for i, (a, b) in enumerate(zip(prev, s, strict=False)) if a != b), min(len(prev), len(s)))
            total, prev = total + len(s) - common, s
        return total

    assert prefilled([seqs[i] for i in order]) == 8 < prefilled(seqs)
