"""`rig bench`: flags to the library's run, a progress bar, the one-screen summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from rig.cli.common import (
    DEFAULT_MODEL,
    allow_host_option,
    app,
    bench_flags,
    cell,
    err,
    experiment_option,
    fail,
    mlflow_option,
    mlflow_ready,
    out,
    say,
    spec_option,
    to_mlflow,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from rig.execution.bench import BenchOptions
from rig.paths import RUNS


@app.command()
def bench(
    ctx: typer.Context,
    model: str | None = spec_option(
        "model", "-m", help="Model from models.yaml (see `rig models`); default: the embedded gemma3-270m."
    ),
    benchmark: str | None = spec_option("benchmark", "-b"),
    gpu: int | None = spec_option("gpu"),
    limit: int | None = spec_option("limit"),
    repeats: int = spec_option("repeats", "-k"),
    data: Path | None = spec_option("data"),
    out_dir: Path = typer.Option(RUNS, "--out", help="Where run folders go."),
    resume: str | None = typer.Option(None, "--resume", help="Run id to resume; finished episodes are skipped."),
    fmt: str | None = typer.Option(
        None, "--format", help="A benchmark's answer format, as its `format` option (`rig benchmarks`)."
    ),
    decode: str = spec_option("decode"),
    tool_mode: str | None = spec_option("tool_mode", default=None),
    option: list[str] = spec_option("options", "-O", default=[]),
    concurrency: int = spec_option("concurrency", "-c"),
    order: str = spec_option("order"),
    temperature: float | None = spec_option("temperature"),
    seed: int | None = spec_option("seed"),
    max_tokens: int | None = spec_option("max_tokens"),
    models_file: Path | None = spec_option("models_file"),
    report: bool = typer.Option(
        True, "--report/--no-report", help="Write report.md and report.html and print a one-screen summary."
    ),
    shard: str | None = spec_option("shard"),
    pass_k: str | None = spec_option("pass_k"),
    spec_file: Path | None = typer.Option(
        None, "--spec", help="A spec.json of run settings (what rig compare and rig sweep hand each cell); flags win."
    ),
    mlflow: str | None = mlflow_option(),
    experiment: str = experiment_option(),
    allow_host: list[str] = allow_host_option(),
) -> None:
    """Run a benchmark on a local model and print its report."""
    from rig.execution.bench import bench_options
    from rig.runfolder.folder import RunFolder
    from rig.runfolder.spec import SpecError

    mlflow_ready(mlflow, allow_host)
    # The run flags reach the spec by their names in ctx.params (bench_flags), only those given on the command
    # line: --resume takes the others from the run's record, and
    # compares the given ones with it (with or without --model). (By name: typer carries its own copy of click's
    # ParameterSource.)
    given = {p for p in ctx.params if getattr(ctx.get_parameter_source(p), "name", "DEFAULT") != "DEFAULT"}
    flags = bench_flags(ctx.params, option, given=given)
    if fmt:  # a flag a benchmark declares as a shorthand for its option (its flag_options)
        from rig.benchmarks import flag_option

        try:
            flags["options"] = {**flags.get("options", {}), **flag_option("format", fmt, benchmark)}
        except KeyError as e:
            fail(str(e).strip("'\""))
    try:
        bo = bench_options(
            {**flags, "out": out_dir, "resume": resume}, spec_file, default_model=None if resume else DEFAULT_MODEL
        )
    except SpecError as e:
        fail(str(e))
    run_dir = _run(bo)
    err.print(f"results: {run_dir}", highlight=False, soft_wrap=True)
    if RunFolder(run_dir).manifest.status == "interrupted":
        raise typer.Exit(130)  # the shell's code for a stopped command: scripts must not take it as finished
    if report:
        # The full tables go to files; the terminal gets one screen (a newcomer cannot read 200 lines of tables).
        from rig.render.html import write_report_files
        from rig.runformat import RunFileError

        try:
            write_report_files(run_dir)
        except RunFileError as e:
            fail(str(e))
        print_screen(run_dir)
    if mlflow is not None:
        to_mlflow(mlflow, experiment, allow_host, run_dir=run_dir)


def _run(bo: BenchOptions) -> Path:
    """The run, with a progress bar once the model is loaded; bad input exits 2 naming it."""
    from rig.benchmarks.base import DataError
    from rig.engines import MissingExtra
    from rig.engines.base import EngineError
    from rig.execution.bench import BenchError, run_bench
    from rig.plugins import PluginError
    from rig.registry import RegistryError
    from rig.runformat import NewerFormatError, RunFileError

    prog, progress = _progress_bar()
    try:
        # soft_wrap: a printed --resume command must stay one line to be copied
        return run_bench(bo, progress=progress, on_event=say)
    except (
        RegistryError,
        DataError,
        BenchError,
        MissingExtra,
        EngineError,
        KeyError,
        NewerFormatError,
        RunFileError,
    ) as e:
        prog.stop()
        fail(str(e).strip("'\""))
    except PluginError as e:  # its text may end in a quote of the plugin's own error
        prog.stop()
        fail(str(e))
    except KeyboardInterrupt as e:  # a stop before the run began (joining weights): the run's own is handled inside
        prog.stop()
        say(f"interrupted: {str(e) or 'no run was started; run the command again'}")
        raise typer.Exit(130) from None
    finally:
        prog.stop()


def _progress_bar() -> tuple[Progress, Callable[[int, int], None]]:
    """An episodes bar (done / total, rate, elapsed, ETA) and the callback that starts and moves it."""
    from rich.progress import Progress, TextColumn

    from rig.progress import columns

    cols = columns("items")
    cols.insert(3, TextColumn("{task.fields[rate]}"))  # after done / total
    prog = Progress(*cols, console=err, transient=False)
    state: dict = {"task": None, "t0": 0.0, "d0": 0}

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if state["task"] is None:  # start the bar only once the model is loaded
            prog.start()
            state.update(task=prog.add_task("episodes", total=total, rate=""), t0=now, d0=done)
        el, n = now - state["t0"], done - state["d0"]
        rate = f"{n / el:.2f} ep/s" if el > 0 and n > 0 else ""
        prog.update(state["task"], completed=done, total=total, rate=rate)

    return prog, progress


def print_screen(run_dir: Path, console: Console | None = None) -> None:
    """The run's one-screen summary: a row per benchmark from its RunSummary, then where the full report is."""
    from rig.render.screen import GAP, column_widths, final_screen

    console = console or out
    table, lines = final_screen(run_dir, console.width)
    t = RichTable(
        title=cell(table.title, 2000),
        caption=cell(table.note, 2000),
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0, 0, GAP - 1),  # with the box's blank column separator, the gap between two columns
        pad_edge=False,
    )
    # Widths that split no word; on a terminal too narrow for even that, rich folds a word rather than hide it.
    fitted = column_widths(table, console.width)
    widths: list[int | None] = [None] * len(table.columns) if fitted is None else [*fitted]
    for c, w in zip(table.columns, widths, strict=True):
        t.add_column(cell(c), width=w, overflow="fold")
    for row in table.rows:
        t.add_row(*(cell(c) for c in row))
    console.print(t)
    for line in lines:  # a path is printed whole, to be copied; prose wraps at spaces
        if str(run_dir) in line:
            say(line, console)
        else:
            console.print(cell(line, 2000), highlight=False)
