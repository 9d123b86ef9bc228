"""rig.quantize's registration: a models file that lacks the source gets a copy of it whose weights still resolve
(issue 37's quantize trap); the fast CLI cases are in tests/cli/test_models.py, the real quantize in
tests/analyses/test_compare_quantize.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.quantize import append_entry, source_copy, source_entry, source_registries
from rig.registry import load_registry

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("model", ["qwen2.5-coder-1.5b", "gemma3-270m", "qwen3-8b", "qwen3-8b-ollama"])
def test_a_copied_entry_reads_back_as_the_source(tmp_path: Path, model: str) -> None:
    """Parts, a package, an environment-variable path and a tag are the same from any file; a base name with
    variants is copied as its default variant under the name asked by."""
    shipped = load_registry(REPO / "models.yaml")
    spec = shipped.get(model)
    new = tmp_path / "lab" / "new.yaml"
    append_entry(new, source_copy(new, model, spec, shipped.path, f"{model}-q8_0"))
    copied = load_registry(new).get(model)
    assert copied.weights == spec.weights
    same = {"name", "base", "variant"}
    assert copied.model_dump(exclude=same) == spec.model_dump(exclude=same)


def test_no_copy_into_the_file_that_holds_the_source(tmp_path: Path) -> None:
    shipped = load_registry(REPO / "models.yaml")
    assert source_copy(REPO / "models.yaml", "gemma3-270m", shipped.get("gemma3-270m"), shipped.path, "g8") == {}


def test_a_relative_path_is_made_absolute_against_its_registry(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    reg_file = tmp_path / "a" / "models.yaml"
    reg_file.write_text(
        "models:\n  m:\n    engine: llamacpp\n    weights: {file: w/m.gguf}\n    quantization: q8_0\n"
        "    context_length: 64\n  e:\n    engine: llamacpp\n    weights: {file: $HOME/m.gguf}\n"
        "    quantization: q8_0\n    context_length: 64\n"
    )
    reg = load_registry(reg_file)
    assert source_entry(reg.get("m"), reg.path)["weights"] == {"file": str(tmp_path / "a" / "w" / "m.gguf")}
    assert source_entry(reg.get("e"), reg.path)["weights"] == {"file": "$HOME/m.gguf"}  # resolves the same anywhere


def test_the_shipped_registry_is_searched_after_a_local_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIG_MODELS", raising=False)
    monkeypatch.chdir(tmp_path)
    Path("models.yaml").write_text("models: {}\n")
    assert [p.resolve() for p in source_registries(Path("models.yaml"))] == [
        (tmp_path / "models.yaml").resolve(),
        (REPO / "models.yaml").resolve(),
    ]
