"""`rig doctor`: engines, GPUs, the offline guard, data and weights."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table as RichTable

from rig.benchmarks import DEFAULT_BENCHMARK
from rig.cli.common import app, cell, fail, out


@app.command()
def doctor(
    benchmark: str | None = typer.Option(
        None, "--benchmark", "-b", help=f"The benchmark whose data is checked (default: {DEFAULT_BENCHMARK})."
    ),
    data: Path | None = typer.Option(None, "--data", help="That benchmark's data folder to check."),
    models_file: Path | None = typer.Option(None, "--models"),
    bandwidth: bool = typer.Option(
        False,
        "--bandwidth",
        help="Measure the peak memory bandwidth and matmul FLOP/s now, with the conditions; the host's cache keeps the "
        "best peak seen (for MBU).",
    ),
    gpu: int | None = typer.Option(None, "--gpu", help="With --bandwidth: probe this GPU instead of the CPU."),
    refresh: bool = typer.Option(
        False, "--refresh", help="With --bandwidth: this probe replaces the cached peak even if lower."
    ),
) -> None:
    """Check engines, GPUs, the offline guard, data and weights; with --bandwidth, probe the memory bandwidth."""
    from rig.doctor import bandwidth_rows, run_checks

    if gpu is not None and gpu < 0:
        fail(f"--gpu {gpu}: must be 0 or more")
    if (gpu is not None or refresh) and not bandwidth:
        fail("--gpu and --refresh go with --bandwidth")
    try:
        rows = bandwidth_rows(gpu, refresh) if bandwidth else run_checks(data, models_file, benchmark)
    except KeyError as e:  # an unknown --benchmark
        fail(str(e).strip("'\""))
    t = RichTable(title="rig doctor")
    for c in ("check", "status", "detail"):
        t.add_column(c)
    for name, status, detail in rows:
        color = {"ok": "green", "warn": "yellow", "fail": "red", "skip": "dim"}[status]
        t.add_row(cell(name), f"[{color}]{status}[/]", cell(detail, 2000))
    out.print(t)
    if any(s == "fail" for _, s, _ in rows):
        raise typer.Exit(1)
