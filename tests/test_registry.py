from pathlib import Path

import pytest

from rig.registry import RegistryError, load_registry, resolve_weights

from .conftest import REPO


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "models.yaml"
    p.write_text(text)
    return p


def test_shipped_registry_loads_with_variants() -> None:
    reg = load_registry(REPO / "models.yaml")
    assert reg.get("gemma3-270m").engine == "llamacpp"
    assert reg.get("qwen3-8b").name == "qwen3-8b-q4"  # base name -> default variant
    assert {m.variant for m in reg.variants_of("qwen3-8b")} == {"q4", "q8", "bf16"}
    assert reg.get("qwen3-8b-q8").quantization == "q8_0"
    assert reg.get("qwen3-8b-ollama-fp16").weights.ollama == "qwen3:8b-fp16"


GOOD = """
models:
  m:
    engine: llamacpp
    weights: {file: w.gguf}
    quantization: q4_k_m
    context_length: 4096
"""


@pytest.mark.parametrize(
    "text, needle",
    [
        (GOOD.replace("llamacpp", "llamacp"), "models.m.engine: unknown engine 'llamacp'"),
        (GOOD.replace("context_length", "context_lenght"), "models.m: unknown field(s) ['context_lenght']"),
        (GOOD.replace("4096", "lots"), "models.m.context_length"),
        (GOOD.replace("{file: w.gguf}", "{file: w.gguf, dir: x}"), "models.m.weights"),
        ("models: [1, 2]", "top-level mapping 'models:'"),
        ("models:\n  m: {engine: [", "not valid YAML"),
        (
            GOOD + "    variants: {q8: {quantisation: q8_0}}\n",
            "models.m.variants.q8: unknown field(s) ['quantisation']",
        ),
    ],
)
def test_bad_registry_names_file_entry_and_field(tmp_path: Path, text: str, needle: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(RegistryError) as e:
        load_registry(p)
    assert str(p) in str(e.value)
    assert needle in str(e.value)


def test_missing_weight_file_named(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD)
    reg = load_registry(p)
    with pytest.raises(RegistryError) as e:
        resolve_weights(reg.get("m"), reg.path)
    msg = str(e.value)
    assert "models.m.weights.file" in msg and str(tmp_path / "w.gguf") in msg
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    assert resolve_weights(reg.get("m"), reg.path) == str(tmp_path / "w.gguf")


def test_unset_env_var_in_weights_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIG_TEST_UNSET", raising=False)
    reg = load_registry(write(tmp_path, GOOD.replace("w.gguf", "$RIG_TEST_UNSET/w.gguf")))
    with pytest.raises(RegistryError, match="RIG_TEST_UNSET is not set"):
        resolve_weights(reg.get("m"), reg.path)


def test_cli_exit_code_2_on_missing_weights(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    p = write(tmp_path, GOOD)
    r = CliRunner().invoke(app, ["bench", "--model", "m", "--models", str(p), "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2
    assert "models.m.weights.file" in r.output
    r = CliRunner().invoke(app, ["bench", "--model", "nope", "--models", str(p)])
    assert r.exit_code == 2 and "no model named 'nope'" in r.output


def test_an_entry_without_engine_says_it_is_missing(tmp_path: Path) -> None:
    p = write(tmp_path, "models:\n  m:\n    weights: {file: w.gguf}\n    quantization: q4\n    context_length: 8\n")
    with pytest.raises(RegistryError, match=r"models\.m\.engine: missing; choose one of") as e:
        load_registry(p)
    assert "None" not in str(e.value)


@pytest.mark.parametrize(
    ("package", "says"),
    [
        ("os", "not a GGUF weights package"),  # an installed module that is not a weights package: never imported
        ("antigravity", "not a GGUF weights package"),
        ("json.decoder_gguf", "not a GGUF weights package"),
        ("no_such_thing_gguf", "is not installed"),
    ],
)
def test_weights_package_must_be_a_gguf_package(tmp_path: Path, package: str, says: str) -> None:
    import sys

    p = write(
        tmp_path,
        f"models:\n  m:\n    engine: llamacpp\n    weights: {{package: {package}}}\n"
        "    quantization: q4\n    context_length: 8\n",
    )
    reg = load_registry(p)
    sys.modules.pop("antigravity", None)
    with pytest.raises(RegistryError, match=rf"models\.m\.weights\.package: .*{says}"):
        resolve_weights(reg.get("m"), reg.path)
    assert "antigravity" not in sys.modules


def test_a_gguf_named_package_without_a_gguf_is_refused(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "fake_weights_gguf.py").write_text("MODEL_NAME = 'x.txt'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = write(
        tmp_path,
        "models:\n  m:\n    engine: llamacpp\n    weights: {package: fake_weights_gguf}\n"
        "    quantization: q4\n    context_length: 8\n",
    )
    reg = load_registry(p)
    with pytest.raises(RegistryError, match="does not expose a GGUF"):
        resolve_weights(reg.get("m"), reg.path)
