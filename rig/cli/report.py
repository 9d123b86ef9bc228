"""`rig report`: markdown tables and the HTML dashboard of run folders."""

from __future__ import annotations

from pathlib import Path

import typer

from rig.cli.common import app, err, fail, print_markdown, say
from rig.cli.common import out as stdout


@app.command()
def report(
    run: list[Path] = typer.Argument(..., help="Run directories (runs/<id>)."),
    html: bool = typer.Option(
        False,
        "--html",
        help="Write one self-contained HTML file (dashboard, tables, episodes) "
        "and its figures beside it as SVG, PDF and PNG.",
    ),
    md: bool = typer.Option(True, "--md/--no-md", help="Print markdown tables."),
    to: Path | None = typer.Option(None, "--out", help="HTML output path (default: report.html in the first run)."),
) -> None:
    """Report runs: tables in the papers' layouts, latency, tokens, memory; --html for plots and an episode browser."""
    from rig.records import write_atomic
    from rig.render.report import report_markdown
    from rig.runformat import NewerFormatError, RunFileError

    for r in run:
        if not (r / "manifest.json").exists():
            fail(f"{r}: no manifest.json (is this a run directory?)")
    try:
        if md:
            for r in run:
                text = report_markdown(r)
                _write_beside(r / "report.md", text)
                print_markdown(text)
        if html:
            from rig.render.html import html_report

            path = to or run[0] / "report.html"
            try:  # the figures beside it are written first: a read-only run folder fails there
                write_atomic(path, html_report(run, figures_dir=path.parent))
            except OSError as e:
                why = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
                fail(f"--out {path}: cannot write the HTML report ({why}); pass --out to write it elsewhere")
            say(f"wrote {path} (its figures beside it as SVG, PDF and PNG)")
    except (NewerFormatError, RunFileError) as e:
        fail(str(e))


@app.command()
def trajectory(
    run: Path = typer.Argument(..., help="A run directory with EVGeoQA results."),
    out: Path = typer.Option(..., "--out", help="The SVG file to write."),
    episode: str | None = typer.Option(None, "--episode", help="Episode id (default: the first whose agent moved)."),
    repeat: int = typer.Option(0, "--repeat", min=0, help="Which repeat of it."),
    pack: str | None = typer.Option(None, "--pack", help="Map pack whose roads are drawn behind (default: none)."),
) -> None:
    """EVGeoQA: one GeoRover trajectory as a self-contained SVG map (the paper's Figure 5)."""
    from rig.benchmarks.base import DataError
    from rig.render.trajectory import TrajectoryError, write_trajectory
    from rig.runformat import NewerFormatError, RunFileError

    try:
        say(write_trajectory(run, out, episode, repeat, pack), stdout)
    except (NewerFormatError, RunFileError, TrajectoryError, DataError, KeyError) as e:
        fail(str(e).strip("'\""))


def _write_beside(path: Path, text: str) -> None:
    """A copy of the report in the run folder; a read-only run folder only loses the copy."""
    from rig.records import write_atomic

    try:
        write_atomic(path, text)
    except OSError as e:
        err.print(f"note: {path} not written ({e.strerror})", highlight=False)
