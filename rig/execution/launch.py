"""The cell launcher: the `rig bench --spec` process that compare variants, load levels and sweep cells each run as."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rig.runfolder.spec import RunSpec, write_spec


def interpreter(model: str, models_file: Path | None = None) -> str:
    """The Python that runs a variant: ``RIG_PYTHON_<ENGINE>`` when set (vLLM's CPU build lives in a venv of its
    own: ``RIG_PYTHON_VLLM=.venv-vllm/bin/python``), else this one. An unknown model is left to ``rig bench``."""
    from rig.registry import RegistryError, load_registry

    try:
        engine = load_registry(models_file).get(model).engine
    except RegistryError:
        return sys.executable
    return os.environ.get(f"RIG_PYTHON_{engine.upper()}") or sys.executable


def bench_argv(spec: RunSpec, folder: Path, out: Path, resume: str | None = None) -> list[str]:
    """The `rig bench` process of one cell: its spec written to ``folder/spec.json`` and read back there, so every
    setting (option values that are lists, null or mappings included) reaches it as the same JSON value."""
    folder.mkdir(parents=True, exist_ok=True)
    path = write_spec(folder / "spec.json", spec)
    assert spec.model is not None  # a cell always names its model
    argv = [interpreter(spec.model, spec.models_file), "-m", "rig.cli", "bench", "--spec", str(path)]
    argv += ["--out", str(out), "--no-report"]
    return argv + (["--resume", resume] if resume is not None else [])
