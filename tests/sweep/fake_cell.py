"""`rig` with a fake engine, for sweep tests where the model is not the point: the real `rig bench` (options, store,
manifest, resume), only the engine answers instantly after FAKE_DELAY seconds. Run as `python -m` this module; as
`python -m tests.sweep.fake_cell sweep ...` it is the real `rig sweep` whose cells run this module too."""

from __future__ import annotations

import functools
import os
import signal
import sys
from typing import Any

from rig.benchmarks.callnavi.benchmark import CallNavi
from tests.fakes import FakeEngine


class Mapped(CallNavi):
    """CallNavi with a mapping option (no shipped benchmark has one yet), registered as `mapped` in the cells, so
    tests can follow nested option values from a sweep file to each cell's manifest."""

    name = "mapped"

    class Options(CallNavi.Options):
        weights: dict[str, Any] | None = None


def _fake_engine(spec, weights, *, gpu=None):  # type: ignore[no-untyped-def]
    if spec.name == os.environ.get("FAKE_CRASH_MODEL"):  # a cell whose process dies every time
        os.kill(os.getpid(), signal.SIGKILL)
    # the GPUs the scheduler gave this cell, for the tests to read in bench.log
    print(f"fake engine: CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}", file=sys.stderr, flush=True)
    # The answer depends on the prompt only, so two runs of the same episodes score alike.
    eng = FakeEngine(lambda req: str(len(req.messages[-1].content) % 3), delay=float(os.environ.get("FAKE_DELAY", "0")))
    eng.spec = spec
    return eng


if __name__ == "__main__":
    import rig.execution.bench as bench
    from rig.benchmarks import BENCHMARKS

    BENCHMARKS["mapped"] = f"tests.sweep.fake_cell:{Mapped.__name__}"
    import rig.sweep.run as sweep_run

    bench.create_engine = _fake_engine  # type: ignore[assignment]
    sweep_run.run_sweep = functools.partial(sweep_run.run_sweep, entry=("-m", "tests.sweep.fake_cell"))  # type: ignore[assignment]
    from rig.cli import main

    sys.argv[0] = "rig"
    main()
