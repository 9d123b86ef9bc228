"""How the divergence pass labels a pair and refuses a vLLM side it cannot load (no model needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from rig.analyses.divergence.compute import _kind, _vllm_scorer
from rig.analyses.divergence.records import DivergenceError, DivergenceSettings
from rig.registry import ModelSpec, Weights


def test_kind_of_a_pair() -> None:
    ref_spec, other = SimpleNamespace(name="g-q4"), SimpleNamespace(name="g-q8")
    llama, vllm = SimpleNamespace(engine="llamacpp"), SimpleNamespace(engine="vllm")
    assert _kind(ref_spec, ref_spec, vllm, vllm) == "self"
    assert _kind(other, ref_spec, llama, llama) == "quantization"
    assert _kind(other, ref_spec, vllm, llama) == "engine divergence"
    assert _kind(other, ref_spec, llama, vllm) == "engine divergence"


def _spec(tmp_path: Path, **engine_args: object) -> ModelSpec:
    return ModelSpec(
        name="g-hf",
        base="g-hf",
        engine="vllm",
        weights=Weights(dir=str(tmp_path)),
        quantization="bf16",
        context_length=512,
        engine_args=dict(engine_args),
    )


def test_vllm_side_refused_naming_variant_and_field(tmp_path: Path) -> None:
    s = DivergenceSettings(reference_run=str(tmp_path), variants=[], out=str(tmp_path))
    with pytest.raises(DivergenceError, match=r"variant 'g-hf': models.yaml engine_args.no_such_arg"):
        _vllm_scorer(_spec(tmp_path, no_such_arg=1), str(tmp_path), 512, s, "variant")
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here: loading is tested in test_divergence_vllm.py")
    with pytest.raises(DivergenceError, match=r"variant 'g-hf': models.yaml engine 'vllm': vLLM is not installed"):
        _vllm_scorer(_spec(tmp_path), str(tmp_path), 512, s, "variant")
