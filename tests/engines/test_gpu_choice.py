"""--gpu has one meaning for every engine and the memory sampler: a position in CUDA_VISIBLE_DEVICES. Checked on
what each engine would hand its backend (no GPU needed, nothing loaded)."""

from __future__ import annotations

import pytest

from rig.engines.base import EngineError
from rig.engines.llamacpp import LlamaCppEngine
from rig.engines.vllm import VllmEngine
from rig.registry import ModelSpec, Weights
from rig.telemetry.gpu import nvml_index_for, visible_devices


def spec(engine: str, **engine_args: object) -> ModelSpec:
    return ModelSpec(
        name="m",
        base="m",
        engine=engine,
        weights=Weights(file="m.gguf") if engine == "llamacpp" else Weights(dir="m"),
        quantization="q4_k_m" if engine == "llamacpp" else "bf16",
        context_length=2048,
        engine_args=engine_args,
    )


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that was given physical GPUs 3 and 5 (a sweep cell, a Ray task, a shared host)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")


def test_every_engine_and_the_sampler_use_the_same_device(two_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda: True)
    for gpu, physical in ((0, "3"), (1, "5")):
        # vLLM: the variable narrowed to the chosen entry (before: "0" or "1", another GPU than the sampler's)
        assert VllmEngine(spec("vllm"), "m", gpu=gpu).device_env() == {"CUDA_VISIBLE_DEVICES": physical}
        # llama.cpp: a CUDA ordinal, i.e. the position in the variable it leaves alone
        kwargs = LlamaCppEngine(spec("llamacpp"), "m.gguf", gpu=gpu).gpu_kwargs()
        assert kwargs["main_gpu"] == gpu and kwargs["n_gpu_layers"] == -1
        assert visible_devices(gpu) == [physical]
        # the memory sampler watches that same physical device
        assert nvml_index_for(gpu) == (int(physical), None)


def test_a_sweep_cell_given_one_gpu_loads_vllm_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # the sweep narrows the variable and passes --gpu 0
    assert VllmEngine(spec("vllm"), "m", gpu=0).device_env() == {"CUDA_VISIBLE_DEVICES": "3"}


def test_tensor_parallel_takes_consecutive_visible_entries(two_gpus: None) -> None:
    eng = VllmEngine(spec("vllm", tensor_parallel_size=2), "m", gpu=0)
    assert eng.device_env() == {"CUDA_VISIBLE_DEVICES": "3,5"}
    with pytest.raises(EngineError, match=r"--gpu 1 with 2 devices: CUDA_VISIBLE_DEVICES='3,5' lists 2"):
        VllmEngine(spec("vllm", tensor_parallel_size=2), "m", gpu=1).device_env()


def test_a_position_past_the_visible_list_is_refused_before_loading(
    two_gpus: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda: True)
    with pytest.raises(EngineError, match="--gpu 2: CUDA_VISIBLE_DEVICES='3,5' lists 2 device"):
        VllmEngine(spec("vllm"), "m", gpu=2).device_env()
    with pytest.raises(EngineError, match="--gpu 2: CUDA_VISIBLE_DEVICES='3,5' lists 2 device"):
        LlamaCppEngine(spec("llamacpp"), "m.gguf", gpu=2).gpu_kwargs()


def test_without_the_variable_gpu_is_the_physical_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert VllmEngine(spec("vllm"), "m", gpu=2).device_env() == {"CUDA_VISIBLE_DEVICES": "2"}
    assert VllmEngine(spec("vllm"), "m").device_env() == {}  # CPU: the environment is left alone
    assert LlamaCppEngine(spec("llamacpp"), "m.gguf").gpu_kwargs() == {"n_gpu_layers": 0}
