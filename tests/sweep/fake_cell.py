"""The sweep tests' engine and benchmark, installed as plugins the way a lab's package is (the entry points of
tests/sweep/plugins/, on PYTHONPATH with the repository: tests/sweep/conftest.py), so each cell is the real `rig bench`
process (options, store, manifest, resume) and rig keeps no test branch: only the engine answers instantly, after
FAKE_DELAY seconds."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.registry import ModelSpec
from tests.fakes import FakeEngine


class Mapped(CallNavi):
    """CallNavi with a mapping option (no shipped benchmark has one yet), so tests can follow nested option values
    from a sweep file to each cell's manifest."""

    name = "mapped"

    class Options(CallNavi.Options):
        weights: dict[str, Any] | None = None


class CellEngine(FakeEngine):
    """Answers from the prompt only, so two runs of the same episodes score alike."""

    name = "fake"

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None) -> None:
        if spec.name == os.environ.get("FAKE_CRASH_MODEL"):  # a cell whose process dies every time
            os.kill(os.getpid(), signal.SIGKILL)
        # the GPUs the scheduler gave this cell, for the tests to read in bench.log
        print(
            f"fake engine: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}", file=sys.stderr, flush=True
        )
        super().__init__(
            lambda req: str(len(req.messages[-1].content) % 3), delay=float(os.environ.get("FAKE_DELAY", "0"))
        )
        self.spec = spec
