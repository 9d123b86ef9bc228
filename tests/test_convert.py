"""`rig models convert`: the Gemma 3 template matches what the llama.cpp engine renders, and unconvertible
architectures are refused with exit code 2. The conversion itself runs in .ci/run's vLLM venv (test_vllm_cpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.convert import GEMMA3_TEMPLATE


def _render(messages: list[dict]) -> str:
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment()
    return env.from_string(GEMMA3_TEMPLATE).render(messages=messages, bos_token="<bos>", add_generation_prompt=True)


def test_gemma3_template_renders_what_llamacpp_renders() -> None:
    """The llama.cpp engine folds system text into the first user turn and tool results into user turns, then
    applies llama-cpp-python's `gemma` format (BOS added at tokenisation); both engines must see the same text."""
    fmt = pytest.importorskip("llama_cpp.llama_chat_format")
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Route to Kamppi?"},
        {"role": "assistant", "content": "call"},
        {"role": "tool", "name": "route", "content": "3 km"},
    ]
    folded = [
        {"role": "user", "content": "Be brief.\n\nRoute to Kamppi?"},
        {"role": "assistant", "content": "call"},
        {"role": "user", "content": "Result of route: 3 km"},
    ]
    assert _render(msgs) == "<bos>" + fmt.format_gemma(messages=folded).prompt


def test_gemma3_template_without_system() -> None:
    expected = "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    assert _render([{"role": "user", "content": "hi"}]) == expected


@pytest.mark.vllm
def test_unconvertible_architecture_is_refused(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from rig.cli import app

    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "rwkv7")
    w.add_tensor("token_embd.weight", __import__("numpy").zeros((4, 4), dtype="float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    models = tmp_path / "models.yaml"
    models.write_text(
        f"models:\n  tiny:\n    engine: llamacpp\n    weights: {{file: {path}}}\n    quantization: f32\n"
        "    context_length: 512\n"
    )
    before = models.read_text()
    res = CliRunner().invoke(
        app, ["models", "convert", "tiny", "--to", "hf", "--models", str(models), "--out", str(tmp_path / "out")]
    )
    assert res.exit_code == 2, res.output
    assert "tiny" in res.output and "'rwkv7'" in res.output and "cannot be converted" in res.output
    assert models.read_text() == before and not (tmp_path / "out").exists()


def test_convert_refuses_other_targets(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    res = CliRunner().invoke(app, ["models", "convert", "gemma3-270m", "--to", "onnx"])
    assert res.exit_code == 2 and "only 'hf'" in res.output
