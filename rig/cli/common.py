"""What every `rig` command shares: the typer app, the consoles, printing and failing. Exit code 2 = bad input."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rig.interrupt import sigterm_as_interrupt
from rig.names import printable

app = typer.Typer(
    help="Offline evaluation rig for open LLMs on geospatial and tool-calling benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
DEFAULT_MODEL = "gemma3-270m"  # the embedded model: runs on CPU with nothing but `pip install`
out = Console()


def say(msg: object, console: Console | None = None) -> None:
    """Print plain text through rich: brackets in it (`pip install 'rig[mobility]'`, `x[0]`) are text, not markup
    that rich would swallow, and text from files (a model name, an error quoting a value) is made printable
    (``rig.names.printable``: no escape sequences or bidi controls, no 50 MB line). Every message that carries data
    (paths, errors, the library's `say` callbacks) goes through here."""
    (console or err).print(escape(printable(msg)), highlight=False, soft_wrap=True)


def print_markdown(md: str) -> None:
    """A report's markdown on stdout (to be read or piped into a file): text from run folders and plugins in it made
    printable (no escape sequence or bidi control reaches the terminal), its long table lines kept whole."""
    sys.stdout.write(printable(md, None) + "\n")


def fail(msg: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(printable(msg))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def cell(value: object, max_chars: int = 200) -> str:
    """A table cell or title holding data (a run id, a model name from a manifest): printable, rich markup escaped."""
    return escape(printable(value, max_chars))


@contextlib.contextmanager
def stops_cleanly(hint: str) -> Iterator[None]:
    """A long command's body: Ctrl-C or SIGTERM stops it with ``hint`` (what was kept, how to go on) and exit 130,
    the shell's code for a stopped command, so a script never takes it as finished; never a traceback."""
    with sigterm_as_interrupt():
        try:
            yield
        except KeyboardInterrupt as e:
            say(f"interrupted: {str(e) or hint}")  # a library's Stopped knows better what was kept
            raise typer.Exit(130) from None


def parse_options(items: list[str]) -> dict[str, str]:
    opts = {}
    for it in items:
        if "=" not in it:
            fail(f"--option {it!r}: expected key=value")
        k, v = it.split("=", 1)
        opts[k.strip()] = v.strip()
    return opts


def csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def spec_list(field: str, value: str) -> list[str]:
    """A RunSpec field given as a comma list (compare's ``--decode none,json``): each item validated by the spec, as
    ``bench_options`` validates one value, so a bad item exits 2 in the words `rig bench` uses for it."""
    from pydantic import ValidationError

    from rig.runfolder.spec import RunSpec, spec_error

    items = csv_list(value)
    for item in items:
        try:
            RunSpec.model_validate({field: item})
        except ValidationError as e:
            fail(str(spec_error(e)))
    return items


def spec_option(field: str, *aliases: str, default: Any = ..., help: str | None = None, **kw: Any) -> Any:
    """The typer option of a RunSpec field: its flag from ``spec.FLAGS``, its default and help text from the field,
    so a setting's flag and the spec say one thing. ``default`` / ``help`` where a command means it differently
    (compare's one seed for every variant); bounds are the spec's, checked by ``bench_options``."""
    from rig.runfolder.spec import FLAGS, RunSpec

    f = RunSpec.model_fields[field]
    if default is ...:
        default = None if f.default_factory is not None else f.default
    return typer.Option(default, FLAGS[field], *aliases, help=help or f.description, **kw)


def bench_flags(
    values: dict[str, Any], option: list[str], *, given: Iterable[str] | None = None, absolute_models: bool = False
) -> dict[str, Any]:
    """What a command's parsed parameters (``ctx.params``) ask of ``bench_options``, the one helper every command
    builds its RunSpec through: the parameters named as a RunSpec field, those given on the command line
    (``given``; else those not None), the ``-O`` strings as options, and with ``absolute_models`` the models file
    made absolute (cell processes read it from their own folder). A new setting's flag needs no edit here."""
    from rig.runfolder.spec import RunSpec

    keep = set(given) if given is not None else {k for k, v in values.items() if v is not None}
    flags = {k: v for k, v in values.items() if k in keep and k in RunSpec.model_fields}
    if absolute_models and isinstance(flags.get("models_file"), Path):
        flags["models_file"] = flags["models_file"].resolve()
    if option:
        flags["options"] = parse_options(option)
    return flags


# -- where results go besides the run folder: an MLflow tracking server (rig.integrations.mlflow) --------------------


def mlflow_option() -> Any:
    return typer.Option(
        None,
        "--mlflow",
        help="MLflow tracking URI (http://127.0.0.1:5000, a lab host allowed with --allow-host, or "
        "sqlite:///PATH/mlflow.db): "
        "the results are logged there when done (again: the same MLflow run is updated).",
    )


def experiment_option() -> Any:
    return typer.Option("rig", "--mlflow-experiment", help="MLflow experiment the runs go to (created if missing).")


def allow_host_option() -> Any:
    return typer.Option(
        [],
        "--allow-host",
        help="HOST:PORT of a lab server the offline guard lets through (repeat it; also RIG_ALLOW_HOSTS, comma "
        "separated); everything else but loopback stays refused.",
    )


def mlflow_ready(uri: str | None, allow: list[str]) -> None:
    """Before any work: the guard with the lab's hosts, and the tracking URI checked against it (exit 2, naming the
    host, if refused), so a long run never ends in an export the guard would refuse."""
    from rig import offline

    try:
        offline.install(allow)
        if uri is not None:
            from rig.integrations.mlflow import check_tracking

            check_tracking(uri)
    except (offline.AllowListError, offline.NetworkRefused) as e:
        fail(str(e))


def to_mlflow(uri: str, experiment: str, allow: list[str], run_dir: Path | None = None, group: Any = None) -> None:
    """Log one run folder (or a comparison, load test or sweep: ``group``) to MLflow; a failure exits 2 naming the
    server, with the run folder untouched."""
    from rig.integrations.mlflow import MlflowExportError, export_group, export_run, run_url
    from rig.offline import redact

    folder = group.folder if group is not None else run_dir
    again = f"rig export {shlex.quote(str(folder))} --mlflow {shlex.quote(redact(uri))}"
    hint = f"the MLflow export stopped part-way; {folder} is unchanged; `{again}` completes the same MLflow run"
    try:
        with stops_cleanly(hint):
            if group is not None:
                result = export_group(group, uri, experiment, allow, say=say)
            else:
                assert run_dir is not None
                result = export_run(run_dir, uri, experiment, allow)
    except MlflowExportError as e:
        fail(str(e))
    what = "logged to" if result.changed or any(c.changed for c in result.children) else "already up to date in"
    nested = f" with {len(result.children)} nested runs" if result.children else ""
    say(f"mlflow: {what} {run_url(uri, result)}{nested}")
