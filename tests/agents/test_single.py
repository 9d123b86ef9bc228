"""repeat_sampling: the one place a benchmark's cap on a reply meets the model's own max_tokens."""

from __future__ import annotations

import pytest

from rig.agents.single import repeat_sampling
from rig.records import DEFAULT_MAX_TOKENS, Sampling


@pytest.mark.parametrize(("model", "cap", "got"), [(512, 768, 512), (1024, 768, 768), (512, None, 512)])
def test_the_lower_of_the_model_s_max_tokens_and_the_cap_applies(model: int, cap: int | None, got: int) -> None:
    s = repeat_sampling(Sampling(max_tokens=model, seed=3), 2, cap=cap)
    assert (s.max_tokens, s.seed) == (got, 5)


def test_a_model_without_max_tokens_gets_the_one_default() -> None:
    assert Sampling().max_tokens == DEFAULT_MAX_TOKENS == 512
