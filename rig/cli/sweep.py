"""`rig sweep` and `rig merge`: grids of `rig bench` cells, and shards joined into one run."""

from __future__ import annotations

from pathlib import Path

import typer

from rig.cli.common import (
    allow_host_option,
    app,
    err,
    experiment_option,
    fail,
    mlflow_option,
    mlflow_ready,
    print_markdown,
    stops_cleanly,
    to_mlflow,
)
from rig.paths import RUNS


@app.command()
def sweep(
    sweep_file: Path = typer.Argument(..., help="sweep.yaml: models x benchmarks x modes, resources, shards."),
    out_dir: Path | None = typer.Option(None, "--out", help="Sweep folder (default: runs/sweep-<file name>)."),
    parallel: int | None = typer.Option(
        None,
        "--parallel",
        "-j",
        min=1,
        help="Cells at once on this machine (default: 1 on a CPU-only host, GPUs / num_gpus with GPUs).",
    ),
    ray: str | None = typer.Option(
        None,
        "--ray",
        help="auto, local (start a one-machine cluster) or a Ray address: cells become Ray tasks with their resources.",
    ),
    ship: bool = typer.Option(
        False,
        "--ship/--shared",
        help="With --ray: ship run folders back to the driver instead of writing to a shared --out path.",
    ),
    mlflow: str | None = mlflow_option(),
    experiment: str = experiment_option(),
    allow_host: list[str] = allow_host_option(),
) -> None:
    """Run every cell of a sweep as its own `rig bench` process; skip finished cells, resume partial ones, retry
    dead ones; end with a leaderboard."""
    from rich.live import Live
    from rich.table import Table as RichTable

    from rig.sweep.leaderboard import write_leaderboard
    from rig.sweep.run import JobState, episode_counts, job_dir, run_sweep
    from rig.sweep.spec import SweepError, load_sweep

    mlflow_ready(mlflow, allow_host)
    try:
        spec, cells = load_sweep(sweep_file)
    except SweepError as e:
        fail(str(e))
    out = out_dir or RUNS / f"sweep-{sweep_file.stem}"
    by_key = {c.key: c for c in cells}

    def table(jobs: list[JobState], root: Path) -> RichTable:
        t = RichTable(title=f"rig sweep: {sum(j.status == 'done' for j in jobs)}/{len(jobs)} done")
        for col in ("cell", "status", "node", "attempts", "episodes"):
            t.add_column(col)
        for j in jobs:
            done, planned = episode_counts(job_dir(root, by_key[j.cell], j.shard, j.shards))
            t.add_row(j.name, j.status, j.node or "", str(j.attempts), f"{done}/{planned if planned else '?'}")
        return t

    with Live(console=err, refresh_per_second=2, transient=False) as live:
        result = run_sweep(
            spec,
            cells,
            out,
            parallel=parallel,
            ray=ray,
            ship=ship,
            on_update=lambda jobs, root: live.update(table(jobs, root)),
            say=lambda m: live.console.print(m, highlight=False),
        )
    md = write_leaderboard(out, cells, result.cells, spec.baseline or spec.models[0])
    err.print(f"sweep: {out} (leaderboard.md, leaderboard.html)", highlight=False)
    print_markdown(md)
    if mlflow is not None:
        from rig.integrations.mlflow import sweep_group

        to_mlflow(mlflow, experiment, allow_host, group=sweep_group(out, result.cells))
    if result.failed:
        err.print(f"{len(result.failed)} cell(s) failed: " + ", ".join(result.failed), highlight=False)
        raise typer.Exit(1)


@app.command()
def merge(
    shard_runs: list[Path] = typer.Argument(..., help="Run folders of shards 0..N-1 of one run (rig bench --shard)."),
    out_dir: Path = typer.Option(RUNS, "--out", help="Where the merged run folder goes."),
) -> None:
    """Join the shards of one run into one run folder, as if one process had run every episode."""
    from rig.execution.bench import BenchError
    from rig.runformat import NewerFormatError
    from rig.sweep.merge import merge_runs

    try:
        with stops_cleanly(f"nothing merged under {out_dir}; run the command again"):
            run_dir = merge_runs(shard_runs, out_dir)
    except (BenchError, NewerFormatError, FileNotFoundError) as e:
        fail(str(e))
    err.print(f"merged: {run_dir}", highlight=False)
