"""`rig runs` and `rig export`: the run folders, and per-episode rows out of one."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table as RichTable

from rig.cli.common import app, cell, fail, out, say


@app.command()
def runs(root: Path = typer.Argument(Path("runs"), help="Folder holding run folders.")) -> None:
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
    run: Path = typer.Argument(..., help="Run directory (or, with --divergence, a comparison folder)."),
    fmt: str = typer.Option("csv", "--format", help="csv, jsonl or parquet."),
    to: Path | None = typer.Option(None, "--out", help="Output file (default: inside the run folder)."),
    divergence: str | None = typer.Option(
        None,
        "--divergence",
        help="classes or episodes: a comparison folder's divergence rows (per variant and token class, or per "
        "episode) instead of a run's episodes; default file divergence-<table>.<format> in the folder.",
    ),
) -> None:
    """Write per-episode rows joined with their telemetry (or a comparison's divergence rows)."""
    from rig.analyses.divergence.output import export_divergence
    from rig.render.export import export

    if divergence is None and not (run / "manifest.json").exists():
        hint = " (a comparison folder: --divergence classes or episodes)" if (run / "divergence.json").exists() else ""
        fail(f"{run}: no manifest.json (is this a run directory?){hint}")
    try:
        path = export(run, fmt, to) if divergence is None else export_divergence(run, divergence, fmt, to)
    except (ValueError, RuntimeError) as e:
        fail(str(e))
    except OSError as e:
        fail(f"--out {e.filename or to}: cannot write the export ({e.strerror})")
    say(f"wrote {path}")
