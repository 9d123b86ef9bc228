"""`rig compare` across engines: each variant's `rig bench` runs under the interpreter for its engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rig.analyses.compare import cell_spec
from rig.execution.bench import BenchOptions
from rig.execution.launch import bench_argv

REPO = Path(__file__).resolve().parents[2]


def argv0(model: str, o: BenchOptions, tmp_path: Path) -> str:
    return bench_argv(cell_spec(model, o), tmp_path / model, tmp_path)[0]


def test_variant_runs_under_its_engines_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RIG_PYTHON_VLLM", "/opt/vllm-venv/bin/python")
    monkeypatch.delenv("RIG_PYTHON_LLAMACPP", raising=False)
    o = BenchOptions(benchmark="callnavi", models_file=REPO / "models.yaml")
    assert argv0("qwen3-8b-vllm", o, tmp_path) == "/opt/vllm-venv/bin/python"
    assert argv0("gemma3-270m", o, tmp_path) == sys.executable
    assert argv0("no-such-model", o, tmp_path) == sys.executable  # rig bench names the error


def test_without_the_variable_every_variant_uses_this_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RIG_PYTHON_VLLM", raising=False)
    o = BenchOptions(benchmark="callnavi", models_file=REPO / "models.yaml")
    assert argv0("qwen3-8b-vllm", o, tmp_path) == sys.executable
