"""vLLM engine. The real tests need a GPU and are marked `gpu` (skipped without one)."""

import asyncio
import importlib.util
import os

import pytest

from rig.engines import MissingExtra, engine_class


def test_missing_extra_names_the_install_command() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(MissingExtra, match=r"pip install 'rig\[vllm\]'"):
        engine_class("vllm")


@pytest.mark.gpu
def test_vllm_counts_timings_and_structured_output() -> None:
    """Needs RIG_VLLM_MODEL=<local HF folder of a small chat model> on a GPU machine."""
    path = os.environ.get("RIG_VLLM_MODEL")
    if not path or importlib.util.find_spec("vllm") is None:
        pytest.skip("set RIG_VLLM_MODEL and install rig[vllm] on a GPU machine")
    from rig.decoding.constraint import Constraint
    from rig.records import ChatRequest, Message, Sampling
    from rig.registry import ModelSpec, Weights

    spec = ModelSpec(
        name="v",
        base="v",
        engine="vllm",
        weights=Weights(dir=path),
        quantization="bf16",
        context_length=4096,
        engine_args={"gpu_memory_utilization": 0.5},
    )
    eng = engine_class("vllm")(spec, path, gpu=0)

    async def go():  # type: ignore[no-untyped-def]
        await eng.load()
        req = ChatRequest(
            messages=[Message(role="user", content="Give a JSON object with key city = Helsinki.")],
            sampling=Sampling(max_tokens=64),
            constraint=Constraint(
                kind="json_schema",
                schema_={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            ),
        )
        gens = await asyncio.gather(*(eng.chat(req) for _ in range(8)))
        await eng.close()
        return gens

    for g in asyncio.run(go()):
        assert g.error is None and g.completion_tokens and g.prompt_tokens
        assert g.timings.ttft_s and g.timings.ttft_s < g.timings.e2e_s
        import json

        assert "city" in json.loads(g.text)


def test_engine_class_does_not_import_the_backend(tmp_path, monkeypatch) -> None:
    """--gpu sets CUDA_VISIBLE_DEVICES in load(); that only works if looking up the engine class left vLLM
    unimported. A stand-in `vllm` package on the path records whether anything imported it."""
    import sys

    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('vllm was imported by engine_class')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    cls = engine_class("vllm")
    assert cls.__name__ == "VllmEngine"
    assert "vllm" not in sys.modules
