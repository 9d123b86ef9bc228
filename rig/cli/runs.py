"""`rig runs` and `rig export`: the run folders, and per-episode rows out of one."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table as RichTable

from rig.cli.common import (
    allow_host_option,
    app,
    cell,
    experiment_option,
    fail,
    mlflow_option,
    mlflow_ready,
    out,
    say,
    to_mlflow,
)
from rig.paths import RUNS


@app.command()
def runs(root: Path = typer.Argument(RUNS, help="Folder holding run folders.")) -> None:
    """List runs: id, model, benchmarks, status, episodes done / total, when."""
    from rig.render.export import list_runs

    if not root.is_dir():  # an empty table would read as "no runs yet" for a mistyped folder
        fail(f"{root}: {'not a folder' if root.exists() else 'no such folder'} (rig runs lists the run folders in one)")
    t = RichTable(title=cell(f"runs in {root}", 2000))
    for c in ("run id", "model", "benchmarks", "status", "done / total", "started"):
        t.add_column(c)
    for r in list_runs(root):
        t.add_row(*(cell(c) for c in (r.run_id, r.model, r.benchmarks, r.status, f"{r.done} / {r.total}", r.started)))
    out.print(t)


@app.command("export")
def export_cmd(
    run: Path = typer.Argument(
        ..., help="Run folder (with --mlflow also a comparison, load or sweep folder; --divergence: a comparison)."
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="csv, jsonl or parquet (episode rows; the default without --mlflow), or inspect: one Inspect eval log per "
        "benchmark (`inspect view` opens the folder).",
    ),
    to: Path | None = typer.Option(
        None, "--out", help="Output file (inspect: a folder; default: inside the run folder, inspect/)."
    ),
    divergence: str | None = typer.Option(
        None,
        "--divergence",
        help="classes or episodes: a comparison folder's divergence rows (per variant and token class, or per "
        "episode) instead of a run's episodes; default file divergence-<table>.<format> in the folder.",
    ),
    mlflow: str | None = mlflow_option(),
    experiment: str = experiment_option(),
    allow_host: list[str] = allow_host_option(),
) -> None:
    """Write per-episode rows joined with their telemetry (or a comparison's divergence rows), Inspect eval logs,
    or log the run (a comparison, load test or sweep: a parent run with nested ones) to MLflow."""
    from rig.analyses.divergence.output import export_divergence
    from rig.render.export import EXPORT_FORMATS, export

    mlflow_ready(mlflow, allow_host)
    group = None
    if mlflow is not None and divergence is None and not (run / "manifest.json").exists():
        from rig.integrations.mlflow import MlflowExportError, find_group

        try:
            group = find_group(run)
        except (MlflowExportError, ValueError, OSError) as e:
            fail(f"{run}: {e}")
        if group is None:
            fail(f"{run}: neither a run folder (manifest.json) nor a comparison, load test or sweep folder")
    elif divergence is None and not (run / "manifest.json").exists():
        hint = " (a comparison folder: --divergence classes or episodes)" if (run / "divergence.json").exists() else ""
        fail(f"{run}: no manifest.json (is this a run directory?){hint}")
    if fmt is not None or mlflow is None:
        fmt = fmt or "csv"
        if divergence is None and fmt not in (*EXPORT_FORMATS, "inspect"):
            fail(f"--format {fmt!r}: choose csv, jsonl, parquet or inspect")
        try:
            if fmt == "inspect" and divergence is None:
                from rig.integrations.inspect_log import InspectUnavailable, write_inspect_logs

                try:
                    for path in write_inspect_logs(run, to):
                        say(f"wrote {path}")
                except InspectUnavailable as e:
                    fail(str(e))
                say(f"view them with: inspect view --log-dir {to or run / 'inspect'}")
            else:
                path = export(run, fmt, to) if divergence is None else export_divergence(run, divergence, fmt, to)
                say(f"wrote {path}")
        except (ValueError, RuntimeError) as e:
            fail(str(e))
        except OSError as e:
            fail(f"--out {e.filename or to}: cannot write the export ({e.strerror})")
    if mlflow is not None:
        to_mlflow(mlflow, experiment, allow_host, run_dir=run if group is None else None, group=group)
