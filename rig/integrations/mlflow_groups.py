"""The groups MLflow gets as a parent run with a nested run per member: a comparison (its variants), a load test
(its levels) and a sweep (its cells), each read from its folder with its own files (compare.md, load.md,
leaderboard.md, their HTML, figures, divergence tables) and params."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from rig.integrations.mlflow_record import (
    MAX_PARAM_VALUE,
    ExportRecord,
    Kind,
    MlflowExportError,
    as_text,
    clip,
    metric_key,
    own_file,
    own_files,
)

FIGURE_SUFFIXES = (".svg", ".pdf", ".png")


class Group(BaseModel):
    """A folder of several runs: its kind, its id, its runs (label, folder) in order, its own files and params."""

    kind: Kind
    id: str
    folder: Path
    runs: list[tuple[str, Path]]
    files: dict[str, Path] = Field(default_factory=dict)
    params: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)


def _own_files(folder: Path, names: Iterable[str]) -> dict[str, Path]:
    """The group's own files that exist, and its figures (SVG, PDF, PNG written beside them) under figures/: regular
    files of the folder only, a symbolic link refused naming it (``own_file``)."""
    out = {n: p for n in names if (p := own_file(folder, n)) is not None}
    out.update({f"figures/{name}": p for name, p in own_files(folder, "", FIGURE_SUFFIXES).items()})
    return out


def compare_group(cdir: Path, runs: list[Path] | None = None) -> Group:
    """A comparison folder: its variants' runs (given, or those under its runs/ in the order they ran, or those its
    divergence pass read), compare.md, compare.html, the figures and the divergence tables."""
    from rig.analyses.compare import read_compare_runs, variant_labels

    if runs is None:
        runs = read_compare_runs(cdir)
    if runs is None:  # written before runs.json: the variants' runs under runs/, in the order they ran
        runs = sorted(p.parent for p in (cdir / "runs").glob("*/manifest.json"))
        if not runs and (cdir / "divergence.json").is_file():
            from rig.analyses.divergence.output import read_report

            rep = read_report(cdir)
            runs = [Path(rep.settings.reference_run), *(Path(v.run) for v in rep.settings.variants if v.run)]
    if not runs:
        raise MlflowExportError(
            f"{cdir}: a comparison of existing runs (rig compare --run) does not record its runs; export it with "
            "`rig compare --run A --run B --mlflow URI`, or each run with `rig export RUN --mlflow URI`"
        )
    labels = variant_labels(runs)
    files = _own_files(
        cdir, ("compare.md", "compare.html", "divergence.csv", "divergence_episodes.csv", "divergence.json")
    )
    params = {"compare.variants": clip(json.dumps(labels), MAX_PARAM_VALUE, "compare.md")}
    members = list(zip(labels, runs, strict=True))
    return Group(kind="compare", id=cdir.name, folder=cdir, runs=members, files=files, params=params)


def load_group(ldir: Path) -> Group:
    """A load folder: each level's run (plan.json), load.md, load.html, load.json, the figure; the verdict."""
    from rig.analyses.load.records import LoadReport
    from rig.analyses.load.run import LoadPlan
    from rig.inputs import read_record

    plan = read_record(ldir / "plan.json", LoadPlan)  # bounded; run ids are folder names under runs/
    runs = [(f"concurrency {level}", ldir / "runs" / rid) for level, rid in sorted(plan.runs.items())]
    s = plan.settings
    params = {
        "load.levels": ",".join(map(str, s.levels)),
        "load.margin": str(s.margin),
        "load.slos": as_text([slo.model_dump(mode="json") for slo in s.slos]),
    }
    metrics = {}
    if (ldir / "load.json").is_file():
        rep = read_record(ldir / "load.json", LoadReport)
        if rep.verdict.level is not None:
            metrics["load/verdict_level"] = float(rep.verdict.level)
    files = _own_files(ldir, ("load.md", "load.html", "load.json"))
    return Group(kind="load", id=ldir.name, folder=ldir, runs=runs, files=files, params=params, metrics=metrics)


def sweep_group(sdir: Path, cells: dict[str, str | None] | None = None) -> Group:
    """A sweep folder: each cell's run (the merged one of a sharded cell), leaderboard.md and .html, the figures."""
    from rig.sweep.run import run_folder

    runs: list[tuple[str, Path]] = []
    if cells is None:
        for cdir in sorted(p for p in (sdir / "cells").glob("*") if p.is_dir()):
            run = run_folder(cdir / "merged") if (cdir / "merged").is_dir() else run_folder(cdir)
            if run is not None:
                runs.append((cdir.name, run))
    else:
        runs = [(key, Path(run)) for key, run in cells.items() if run is not None]
    files = _own_files(sdir, ("leaderboard.md", "leaderboard.html"))
    params = {"sweep.cells": str(len(runs))}
    return Group(kind="sweep", id=sdir.name, folder=sdir, runs=runs, files=files, params=params)


def find_group(folder: Path) -> Group | None:
    """The group a folder holds (a comparison, a load test or a sweep), or None for anything else."""
    if (folder / "compare.md").is_file():
        return compare_group(folder)
    if (folder / "plan.json").is_file():
        return load_group(folder)
    if (folder / "cells").is_dir():
        return sweep_group(folder)
    return None


def group_record(g: Group) -> ExportRecord:
    return ExportRecord(
        key=f"{g.kind}:{g.id}",
        name=g.id,
        kind=g.kind,
        params={metric_key(k): v for k, v in g.params.items()},
        metrics=g.metrics,
        tags={"rig.group_id": g.id, "rig.kind": g.kind, "mlflow.source.name": "rig"},
        artifacts=g.files,
    )
