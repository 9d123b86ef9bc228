"""`rig doctor`: engines, GPUs, the offline guard, data and weights."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from rig.cli.common import app, out


@app.command()
def doctor(
    data: Path | None = typer.Option(None, "--data", help="CallNavi data folder to check."),
    models_file: Path | None = typer.Option(None, "--models"),
) -> None:
    """Check engines, GPUs, the offline guard, data and weights."""
    from rig.doctor import run_checks

    rows = run_checks(data=data, models_file=models_file)
    t = RichTable(title="rig doctor")
    for c in ("check", "status", "detail"):
        t.add_column(c)
    for name, status, detail in rows:
        color = {"ok": "green", "warn": "yellow", "fail": "red", "skip": "dim"}[status]
        t.add_row(escape(name), f"[{color}]{status}[/]", escape(detail))
    out.print(t)
    if any(s == "fail" for _, s, _ in rows):
        raise typer.Exit(1)
