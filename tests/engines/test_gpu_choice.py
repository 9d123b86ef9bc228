"""--gpu has one meaning for every engine and the memory sampler: a position in CUDA_VISIBLE_DEVICES. Checked on
what each engine would hand its backend (no GPU needed, nothing loaded)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rig.engines.base import EngineError
from rig.engines.llamacpp import LlamaCppEngine
from rig.engines.ollama import OllamaEngine
from rig.engines.openai_compat import OpenAICompatEngine
from rig.engines.vllm import VllmEngine
from rig.registry import ModelSpec, Weights
from rig.telemetry.gpu import nvml_index_for, visible_devices

WEIGHTS = {"llamacpp": Weights(file="m.gguf"), "ollama": Weights(ollama="m")}


def spec(engine: str, **engine_args: object) -> ModelSpec:
    return ModelSpec(
        name="m",
        base="m",
        engine=engine,
        weights=WEIGHTS.get(engine, Weights(dir="m")),
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


# A stand-in for `vllm serve` / `llama_cpp.server`: records the device it was given, then answers like an
# OpenAI-compatible server (no constraint enforced, a usage chunk in the stream).
FAKE_SERVER = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port, record = int(sys.argv[1]), sys.argv[2]
with open(record, "w") as f:
    json.dump({"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}, f)


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, text, ctype="application/json"):
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send(json.dumps({"data": [{"id": "fake"}]}))

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        usage = {"prompt_tokens": 3, "completion_tokens": 1}
        if not body.get("stream"):
            message = {"role": "assistant", "content": "hi"}
            return self.send(json.dumps({"choices": [{"index": 0, "message": message}], "usage": usage}))
        events = [{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}]
        events.append({"choices": [], "usage": usage})
        self.send("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n", "text/event-stream")


HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_a_spawned_server_is_started_on_the_device_gpu_names(
    two_gpus: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "server.py").write_text(FAKE_SERVER)
    record = tmp_path / "env.json"
    command = ["python", str(tmp_path / "server.py"), "{port}", str(record)]
    eng = OpenAICompatEngine(spec("openai_compat", spawn=command, ready_timeout_s=30), "m", gpu=1)

    async def load_and_close() -> None:
        await eng.load()
        await eng.close()

    asyncio.run(load_and_close())
    # position 1 of CUDA_VISIBLE_DEVICES=3,5: physical GPU 5, which the memory sampler watches too
    assert json.loads(record.read_text()) == {"CUDA_VISIBLE_DEVICES": "5"}
    assert nvml_index_for(1) == (5, None)
    assert eng.device_placement() is None  # nothing to warn about


def test_engines_that_cannot_choose_the_device_say_why() -> None:
    attached = OpenAICompatEngine(spec("openai_compat", base_url="http://127.0.0.1:8000"), "m", gpu=0)
    assert "attached to and did not start" in (attached.device_placement() or "")
    ollama = OllamaEngine(spec("ollama"), "qwen:0.5b", gpu=0)
    assert "Ollama server at http://127.0.0.1:11434" in (ollama.device_placement() or "")
    assert LlamaCppEngine(spec("llamacpp"), "m.gguf", gpu=0).device_placement() is None
    assert VllmEngine(spec("vllm"), "m", gpu=0).device_placement() is None
