"""rig models quantize + rig compare, end to end on the embedded model (CPU)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.model


def test_quantize_then_compare(tmp_path: Path, embedded_weights: str, quantized_models: Path) -> None:
    models = quantized_models
    entry = yaml.safe_load(models.read_text())["models"]["gemma3-270m-q4_0"]
    assert entry["quantization"] == "q4_0" and entry["weights"]["file"] == "w/g-q4_0.gguf"
    gguf = tmp_path / "w" / "g-q4_0.gguf"
    assert gguf.read_bytes()[:4] == b"GGUF" and gguf.stat().st_size != Path(embedded_weights).stat().st_size

    c = subprocess.run(
        [
            sys.executable,
            "-m",
            "rig.cli",
            "compare",
            "gemma3-270m",
            "gemma3-270m-q4_0",
            "--models",
            str(models),
            "--limit",
            "2",
            "-O",
            "task=routing",
            "--max-tokens",
            "8",
            "--out",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert c.returncode == 0, c.stderr
    cdir = next((tmp_path / "runs").glob("compare-*"))
    md = (cdir / "compare.md").read_text()
    assert "| gemma3-270m | q4_k_m | 2 |" in md and "| gemma3-270m-q4_0 | q4_0 | 2 |" in md
    assert "Paired differences against gemma3-270m" in md
    for svg in ("pareto_latency.svg", "pareto_memory.svg"):
        text = (cdir / svg).read_text()
        assert text.count('id="point:') == 2  # one point per variant (matplotlib: a named marker group each)
    runs = list((cdir / "runs").iterdir())
    assert len(runs) == 2  # each variant ran in its own process, into its own run folder


def test_unknown_quantization_is_clear(tmp_path: Path, embedded_weights: str) -> None:
    models = tmp_path / "models.yaml"
    shutil.copy(REPO / "models.yaml", models)
    q = subprocess.run(
        [sys.executable, "-m", "rig.cli", "models", "quantize", "gemma3-270m", "--to", "q9_9", "--models", str(models)],
        capture_output=True,
        text=True,
    )
    assert q.returncode == 2 and "unknown quantization 'q9_9'" in q.stderr


def _rig(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`rig` in ``cwd`` as a user runs it there: no $RIG_MODELS, this tree's rig."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "RIG_MODELS"} | {"PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "rig.cli", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_quantize_into_a_local_or_new_models_file_then_compare(tmp_path: Path, embedded_weights: str) -> None:
    """Issue 37's quantize trap, for real: (a) ./models.yaml from an earlier quantize (its variant only) given as
    --models still finds the built-in source; (b) a new models file gets the source's entry too, so `rig compare M
    M-q8_0 --models new.yaml` names both and the source's weights resolve from there."""
    earlier = "models:\n  old-q8_0:\n    engine: llamacpp\n    weights: {file: old.gguf}\n    quantization: q8_0\n"
    (tmp_path / "models.yaml").write_text(earlier + "    context_length: 2048\n")
    a = _rig(tmp_path, "models", "quantize", "gemma3-270m", "--to", "q4_0", "--models", "models.yaml")
    assert a.returncode == 0, a.stderr
    local = yaml.safe_load((tmp_path / "models.yaml").read_text())["models"]
    assert list(local) == ["old-q8_0", "gemma3-270m", "gemma3-270m-q4_0"]
    assert (tmp_path / "weights" / "gemma3-270m-q4_0.gguf").read_bytes()[:4] == b"GGUF"

    b = _rig(tmp_path, "models", "quantize", "gemma3-270m", "--to", "q8_0", "--models", "new.yaml")
    assert b.returncode == 0, b.stderr
    assert "copied models.gemma3-270m from" in " ".join(b.stderr.split())
    assert list(yaml.safe_load((tmp_path / "new.yaml").read_text())["models"]) == ["gemma3-270m", "gemma3-270m-q8_0"]
    c = _rig(
        tmp_path,
        *("compare", "gemma3-270m", "gemma3-270m-q8_0", "--models", "new.yaml", "--limit", "1"),
        *("-O", "task=routing", "--max-tokens", "8", "--out", "runs"),
    )
    assert c.returncode == 0, c.stderr
    md = (next((tmp_path / "runs").glob("compare-*")) / "compare.md").read_text()
    assert "| gemma3-270m | q4_k_m | 1 |" in md and "| gemma3-270m-q8_0 | q8_0 | 1 |" in md
