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


@pytest.mark.model
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_convert_stopped_by_a_signal_leaves_nothing_and_the_rerun_completes(
    tmp_path: Path, embedded_weights: str, how: str
) -> None:
    """A real `rig models convert` process stopped by Ctrl-C or SIGTERM once its folder is written but not yet in
    place: exit 130 with a hint, no folder under --out nor a partial one beside it, the models file unchanged, and
    the same command then converts and registers."""
    import subprocess
    import sys

    from rig.convert import ConvertError, check_extra
    from tests.test_interrupt import ROOT, stopped_midway

    try:
        check_extra()
    except ConvertError as e:  # its extra is not installed here
        pytest.skip(str(e))
    out, models = tmp_path / "hf", tmp_path / "models.yaml"
    args = ["models", "convert", "gemma3-270m", "--to", "hf", "--out", str(out), "--models", str(models)]
    r = stopped_midway(tmp_path, tmp_path / "ready", "rig.convert:write_atomic", args, how)
    assert r.returncode == 130, r.stderr
    assert f"interrupted: nothing written under {out} or to {models}" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"]  # no folder, no partial one, no models file
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    again = subprocess.run(
        [sys.executable, "-m", "rig.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert again.returncode == 0, again.stderr
    assert (out / "rig_convert.json").is_file() and "gemma3-270m-hf" in models.read_text()
