"""`rig rescore`: predictions made outside rig scored into a run folder."""

from __future__ import annotations

from pathlib import Path

import typer

from rig.cli.common import app, fail, parse_options, say
from rig.paths import RUNS


@app.command()
def rescore(
    scorer: str = typer.Argument(
        ...,
        metavar="SCORER",
        help="A scorer of prediction files: rig's are named after their benchmark (callnavi, mobilitybench); an "
        "unknown name lists them all, installed plugins' included.",
    ),
    predictions: list[Path] = typer.Argument(..., help="Prediction files in the reference harness's own format."),
    mode: str = typer.Option("paper", "--mode", help="Metric mode of the main tables: paper or reference."),
    data: Path | None = typer.Option(None, "--data", help="The benchmark data the predictions answer."),
    label: str | None = typer.Option(None, "--label", help="Model name in the tables (default: from the files)."),
    out_dir: Path = typer.Option(RUNS, "--out", help="Where the run folder is written."),
    option: list[str] = typer.Option([], "--option", "-O", help="Benchmark option key=value (repeatable)."),
) -> None:
    """Score predictions made outside rig (CallNavi output files, MobilityBench raw_results.json) into a run folder."""
    from rig.execution.rescore import RescoreError, RescoreOptions, rescorable, rescore
    from rig.progress import progress

    if scorer not in rescorable():
        fail(f"rescore: no scorer {scorer!r}; choose {' or '.join(rescorable())}")
    if mode not in ("paper", "reference"):
        fail(f"--mode {mode!r}: choose paper or reference")
    opts = RescoreOptions(
        scorer=scorer,
        predictions=predictions,
        data=data,
        mode=mode,  # type: ignore[arg-type]
        label=label,
        out=out_dir,
        options=parse_options(option),
    )
    try:
        with progress("writing results", transient=True) as bar:
            run_dir = rescore(opts, progress=bar.update)
    except RescoreError as e:
        fail(str(e))
    say(f"wrote {run_dir}; next: rig report {run_dir} --html")  # the folder name carries the label: not markup
