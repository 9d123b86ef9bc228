"""`rig rescore`: score predictions made outside rig, in the reference harness's own per-case files, with rig's
metrics in paper and reference mode (``--mode`` picks the main one; both are stored, as a run stores them), into a
normal run folder (manifest + results.sqlite) that `rig report`, `--html` and `rig export` read like any other.

Which files are read, and how, is a scorer's (`rig.benchmarks.predictions.Scorer`, from the one registry's
``rig.scorers`` group: rig's own read CallNavi's output lists and MobilityBench's ``raw_results.json``, in those
benchmarks' `rescore.py`; a lab's package adds its own); this module knows no benchmark by name and turns what a
scorer reads into the run folder. A plugin scorer that cannot be imported or raises is a `RescoreError` naming it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from rig import plugins
from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import DataError
from rig.benchmarks.predictions import Scorer, short
from rig.paths import RUNS
from rig.registry import EXTERNAL, ModelSpec, Weights
from rig.runfolder.config import BenchmarkInfo, RunConfig
from rig.runfolder.manifest import RunManifest, new_run_id, package_versions
from rig.runfolder.store import Store


def rescorable() -> list[str]:
    """The scorers `rig rescore` may name: rig's own (named after their benchmark), then installed packages'."""
    return list(plugins.names(plugins.SCORER_GROUP))


class RescoreError(Exception):
    """Bad input (a file or a field in it); str() names them and is shown to the user."""


class RescoreOptions(BaseModel):
    scorer: str  # one of rescorable()
    predictions: list[Path]
    data: Path | None = None
    mode: Literal["paper", "reference"] = "paper"
    label: str | None = None  # the model name in tables; default: from the file names, else "external"
    out: Path = RUNS
    options: dict[str, Any] = Field(default_factory=dict)  # benchmark options other than mode

    @field_validator("scorer")
    @classmethod
    def _rescorable(cls, v: str) -> str:
        if v not in rescorable():
            raise ValueError(f"no scorer reads prediction files of {v!r}; choose {' or '.join(rescorable())}")
        return v


def _scorer(name: str) -> tuple[plugins.Plugin, type[Scorer], type[Any]]:
    """The scorer's entry, its class and its benchmark's class; a plugin that cannot be used is a RescoreError."""
    entry = plugins.table(plugins.SCORER_GROUP)[name]
    try:
        cls: type[Scorer] = plugins.load(entry)
        try:
            bench = get_benchmark_class(cls.benchmark)
        except KeyError as e:
            raise plugins.PluginError(f"{entry}: scores benchmark {cls.benchmark!r}, which is not installed") from e
    except plugins.PluginError as e:
        raise RescoreError(str(e)) from None
    return entry, cls, bench


def rescore(opts: RescoreOptions, progress: Callable[[int, int], Any] | None = None) -> Path:
    """Score the prediction files and write a run folder; return its path."""
    if not opts.predictions:
        raise RescoreError("no prediction files given")
    if "mode" in opts.options:
        raise RescoreError("pass the metric mode as --mode, not -O mode=")
    entry, scorer, bench_cls = _scorer(opts.scorer)
    try:
        options = scorer.options(bench_cls, dict(opts.options), opts.mode)
        bench = bench_cls(opts.data, options)
        results, found = scorer().read(bench, opts.predictions, opts.mode)
    except DataError as e:
        raise RescoreError(str(e)) from None
    except Exception as e:  # a plugin's bug is its own, named; one of rig's own is rig's, with its traceback
        if entry.builtin:
            raise
        raise RescoreError(f"{entry}: raised {type(e).__name__}: {e}") from e
    if not results:
        raise RescoreError(f"{', '.join(map(str, opts.predictions))}: no predictions")
    if len(found) > 1:  # one run is one model: repeats of two models would be read as one model's instability
        names = ", ".join(short(m) for m in sorted(found)[:4]) + (", ..." if len(found) > 4 else "")
        raise RescoreError(
            f"{', '.join(p.name for p in opts.predictions)}: predictions of {len(found)} models ({names}); "
            "rescore each model's files separately"
        )
    label = opts.label or (found.pop() if found else "external")
    files = ", ".join(p.name for p in opts.predictions)
    spec = ModelSpec(
        name=label,
        base=label,
        engine=EXTERNAL,
        weights=Weights(file=files),
        quantization="unknown",
        context_length=1,
        description=f"predictions made outside rig, re-scored by rig rescore ({opts.mode} mode)",
    )
    repeats = max(r.repeat for r in results) + 1
    episodes = len({r.episode_id for r in results})
    info = BenchmarkInfo.of(bench, episodes)
    # Not recorded: tool mode "external", max_tokens 0, values no request may ask for but a record may hold.
    cfg = RunConfig.model_validate(
        dict(
            model=spec, benchmarks=[info], repeats=repeats, tool_mode="external", seed=0, temperature=0.0, max_tokens=0
        )
    )
    run_id = new_run_id(label, f"{bench.name}-rescore")
    run_dir = opts.out / run_id
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
    except (OSError, ValueError) as e:  # --out a file, unwritable, or a name the file system refuses
        why = getattr(e, "strerror", None) or e
        raise RescoreError(f"--out {opts.out}: cannot create the run folder {run_id} ({why})") from None
    manifest = RunManifest.begin(
        run_id,
        cfg,
        versions=package_versions(),
        engine_info={
            "rescored_from": [str(p) for p in opts.predictions],
            "mode": opts.mode,
            "scorer": f"{entry.name} ({entry.target}) from {entry.dist}",
        },
    )
    manifest.write(run_dir)
    store = Store(run_dir / "results.sqlite")
    try:
        for i, r in enumerate(results, 1):
            store.write(r)
            if progress:
                progress(i, len(results))
    finally:
        store.close()
    manifest.status, manifest.finished_at = "finished", time.time()
    manifest.write(run_dir)
    return run_dir
