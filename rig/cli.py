"""`rig` command line: parses, validates, calls the library. Exit code 2 = bad input."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

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
    that rich would swallow. Every message that carries data (paths, errors, the library's `say` callbacks) goes
    through here."""
    (console or err).print(escape(str(msg)), highlight=False, soft_wrap=True)


def _fail(msg: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _parse_options(items: list[str]) -> dict[str, str]:
    opts = {}
    for it in items:
        if "=" not in it:
            _fail(f"--option {it!r}: expected key=value")
        k, v = it.split("=", 1)
        opts[k.strip()] = v.strip()
    return opts


def _tool_mode(tool_mode: str | None, decode: str) -> str:
    """--decode json/yaml also constrains the tool calls of agentic benchmarks unless --tool-mode says otherwise
    (they have no other answer to constrain, and a flag that silently did nothing there would mislead)."""
    if tool_mode is None:
        return decode if decode in ("json", "yaml") else "prompt"
    if tool_mode not in ("native", "prompt", "json", "yaml"):
        _fail(f"--tool-mode {tool_mode!r}: choose native, prompt, json or yaml")
    return tool_mode


@app.command()
def bench(
    ctx: typer.Context,
    model: str | None = typer.Option(
        None, "--model", "-m", help="Model from models.yaml (see `rig models`); default: the embedded gemma3-270m."
    ),
    benchmark: str | None = typer.Option(
        None, "--benchmark", "-b", help="Benchmark to run (default: every benchmark with data available)."
    ),
    gpu: int | None = typer.Option(None, "--gpu", help="GPU ordinal; CPU when omitted."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Run a seeded sample of N questions."),
    repeats: int = typer.Option(1, "--repeats", "-k", min=1, help="Runs per episode (stability scores need k > 1)."),
    data: Path | None = typer.Option(None, "--data", help="Benchmark data folder (default: the embedded sample)."),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="Where run folders go."),
    resume: str | None = typer.Option(None, "--resume", help="Run id to resume; finished episodes are skipped."),
    fmt: str | None = typer.Option(None, "--format", help="Answer format for CallNavi: json or yaml."),
    decode: str = typer.Option("none", "--decode", help="Constrain output: none, json or yaml."),
    tool_mode: str | None = typer.Option(
        None,
        "--tool-mode",
        help="How tools are offered: native, prompt, json or yaml (constrained "
        "calls); default: the --decode format, else prompt.",
    ),
    option: list[str] = typer.Option(
        [],
        "--option",
        "-O",
        help="Benchmark option key=value (e.g. task=routing); `rig benchmarks` lists each benchmark's options.",
    ),
    concurrency: int = typer.Option(1, "--concurrency", "-c", min=1, help="Episodes in flight."),
    order: str = typer.Option("grouped", "--order", help="grouped (shared prompt prefixes together) or shuffled."),
    temperature: float | None = typer.Option(None, "--temperature", min=0.0, help="Override the model's temperature."),
    seed: int | None = typer.Option(None, "--seed", help="Override the model's seed."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Override the model's max_tokens."),
    models_file: Path | None = typer.Option(None, "--models", help="models.yaml to use."),
    report: bool = typer.Option(
        True, "--report/--no-report", help="Write report.md and report.html and print a one-screen summary."
    ),
    shard: str | None = typer.Option(
        None,
        "--shard",
        help="I/N: run only shard I (0-based) of N of the selected questions (rig sweep; join shards with rig merge).",
    ),
) -> None:
    """Run a benchmark on a local model and print its report."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from rig.benchmarks.base import DataError
    from rig.engines import MissingExtra
    from rig.engines.base import EngineError
    from rig.registry import RegistryError
    from rig.runformat import NewerFormatError, RunFileError
    from rig.runs.bench import BenchError, BenchOptions, run_bench
    from rig.runs.report import report_markdown
    from rig.runs.store import open_manifest

    if decode not in ("none", "json", "yaml"):
        _fail(f"--decode {decode!r}: choose none, json or yaml")
    tool_mode = _tool_mode(tool_mode, decode)
    opts = _parse_options(option)
    # --format is CallNavi's answer format; --decode implies it there (other benchmarks have their own schemas).
    fmt_key = "format" if benchmark == "callnavi" else "callnavi.format" if benchmark is None else None
    if fmt:
        if fmt not in ("json", "yaml"):
            _fail(f"--format {fmt!r}: choose json or yaml")
        if fmt_key is None:
            _fail(f"--format is CallNavi's answer format; benchmark {benchmark} has none")
        opts[fmt_key] = fmt
    elif decode != "none" and fmt_key is not None:
        opts.setdefault(fmt_key, decode)
    if model is None and resume is None:
        model = DEFAULT_MODEL
    # Only the flags given on the command line are passed: --resume takes the others from the run's record, and
    # compares the given ones with it (with or without --model).
    # (by name: typer carries its own copy of click's ParameterSource)
    given = {p for p in ctx.params if getattr(ctx.get_parameter_source(p), "name", "DEFAULT") != "DEFAULT"}
    if "tool_mode" not in given and "decode" in given:
        given.add("tool_mode")  # implied by --decode
    if opts or fmt or decode != "none":
        given.add("options")
    values = dict(
        model=model,
        benchmark=benchmark,
        gpu=gpu,
        limit=limit,
        repeats=repeats,
        data=data,
        out=out_dir,
        resume=resume,
        decode=decode,
        tool_mode=tool_mode,
        options=opts,
        concurrency=concurrency,
        order=order,
        models_file=models_file,
        temperature=temperature,
        seed=seed,
        max_tokens=max_tokens,
        shard=shard,
    )
    names = {"out_dir": "out", "option": "options", "fmt": "options"}
    given = {names.get(g, g) for g in given}
    if resume is None:
        given = set(values)
    bo = BenchOptions.model_validate({k: v for k, v in values.items() if k in given or k in ("out", "resume")})
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    prog = Progress(*columns, console=err, transient=False)
    state: dict = {"task": None, "t0": 0.0, "d0": 0}

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if state["task"] is None:  # start the bar only once the model is loaded
            prog.start()
            state.update(task=prog.add_task("episodes", total=total, rate=""), t0=now, d0=done)
        el, n = now - state["t0"], done - state["d0"]
        rate = f"{n / el:.2f} ep/s" if el > 0 and n > 0 else ""
        prog.update(state["task"], completed=done, total=total, rate=rate)

    try:
        # soft_wrap: a printed --resume command must stay one line to be copied
        run_dir = run_bench(
            bo, progress=progress, on_event=lambda m: err.print(escape(m), highlight=False, soft_wrap=True)
        )
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
        _fail(str(e).strip("'\""))
    prog.stop()
    err.print(f"results: {run_dir}", highlight=False, soft_wrap=True)
    if open_manifest(run_dir).status == "interrupted":
        raise typer.Exit(130)  # the shell's code for a stopped command: scripts must not take it as finished
    if report:
        from rig.runs.html import html_report

        # The full tables go to files; the terminal gets one screen (a newcomer cannot read 200 lines of tables).
        (run_dir / "report.md").write_text(report_markdown(run_dir))
        (run_dir / "report.html").write_text(html_report([run_dir]))
        print_screen(run_dir)


def print_screen(run_dir: Path, console: Console | None = None) -> None:
    """The run's one-screen summary: a row per benchmark from its RunSummary, then where the full report is."""
    from rig.runs.screen import final_screen

    table, lines = final_screen(run_dir)
    t = RichTable(
        title=escape(table.title),
        caption=escape(table.note),
        title_justify="left",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    # Benchmark names are never cut; on a narrow terminal the wordy cells wrap at spaces, and a word longer than
    # its column folds rather than hiding behind an ellipsis.
    for i, c in enumerate(table.columns):
        t.add_column(escape(c), no_wrap=i == 0, overflow="fold" if i else "ellipsis")
    for row in table.rows:
        t.add_row(*(escape(str(c)) for c in row))
    console = console or out
    console.print(t)
    for line in lines:
        say(line, console)


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
    from rig.runformat import NewerFormatError, RunFileError
    from rig.runs.report import report_markdown

    for r in run:
        if not (r / "manifest.json").exists():
            _fail(f"{r}: no manifest.json (is this a run directory?)")
    try:
        if md:
            for r in run:
                text = report_markdown(r)
                _write_beside(r / "report.md", text)
                sys.stdout.write(text + "\n")
        if html:
            from rig.runs.html import html_report

            path = to or run[0] / "report.html"
            try:  # the figures beside it are written first: a read-only run folder fails there
                path.write_text(html_report(run, figures_dir=path.parent))
            except OSError as e:
                why = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
                _fail(f"--out {path}: cannot write the HTML report ({why}); pass --out to write it elsewhere")
            say(f"wrote {path} (its figures beside it as SVG, PDF and PNG)")
    except (NewerFormatError, RunFileError) as e:
        _fail(str(e))


def _write_beside(path: Path, text: str) -> None:
    """A copy of the report in the run folder; a read-only run folder only loses the copy."""
    try:
        path.write_text(text)
    except OSError as e:
        err.print(f"note: {path} not written ({e.strerror})", highlight=False)


def _mount_maps() -> None:
    from rig.maps.cli import app as maps_app  # typer only at import: the map libraries load inside commands

    app.add_typer(maps_app, name="maps")


_mount_maps()

models_app = typer.Typer(help="The model registry (models.yaml).", invoke_without_command=True)
app.add_typer(models_app, name="models")


@models_app.callback()
def models(
    ctx: typer.Context, models_file: Path | None = typer.Option(None, "--models", help="models.yaml to use.")
) -> None:
    """List the model registry and whether each model's weights are present."""
    if ctx.invoked_subcommand:
        return
    from rig.registry import RegistryError, load_registry, weights_present

    try:
        reg = load_registry(models_file)
    except RegistryError as e:
        _fail(str(e))
    t = RichTable(title=escape(f"models ({reg.path})"))
    for c in ("name", "engine", "quant", "ctx", "weights", "present"):
        t.add_column(c)
    for name, spec in reg.models.items():
        ok, _detail = weights_present(spec, reg.path)
        default = " (default)" if reg.defaults.get(spec.base) == name else ""
        t.add_row(
            *(
                escape(str(c))
                for c in (
                    name + default,
                    spec.engine,
                    spec.quantization,
                    spec.context_length,
                    f"{spec.weights.kind}: {spec.weights.ref}",
                )
            ),
            "yes" if ok else "[red]no[/]",
        )
    out.print(t)


@models_app.command("quantize")
def quantize(
    model: str = typer.Argument(..., help="Source model (a llama.cpp GGUF entry of models.yaml)."),
    to: str = typer.Option(..., "--to", help="Target quantization, e.g. q4_0, q8_0, q5_k_m."),
    out_path: Path | None = typer.Option(None, "--out", help="Output .gguf (default: weights/<name>.gguf)."),
    name: str | None = typer.Option(None, "--name", help="Name of the new models.yaml entry."),
    models_file: Path | None = typer.Option(None, "--models", help="models.yaml to read and append to."),
    register: bool = typer.Option(True, "--register/--no-register", help="Append the new entry to models.yaml."),
) -> None:
    """Make a new GGUF variant with llama.cpp's quantize API and register it."""
    from rig.quantize import append_entry, quantize_gguf, variant_entry
    from rig.registry import RegistryError, default_registry_path, load_registry, resolve_weights

    try:
        path = models_file or default_registry_path()
        reg = load_registry(path)
        spec = reg.get(model)
        if spec.engine != "llamacpp":
            _fail(f"{model}: quantize works on llama.cpp GGUF models, this one uses {spec.engine}")
        src = resolve_weights(spec, reg.path)
        new = name or f"{spec.base}-{to.lower()}"
        dst = out_path or Path("weights") / f"{new}.gguf"
        t = time.perf_counter()
        quantize_gguf(src, dst.resolve(), to)
        say(f"wrote {dst} ({dst.stat().st_size / 2**20:.1f} MiB) in {time.perf_counter() - t:.1f}s")
        if register:
            append_entry(Path(path), new, variant_entry(spec, to, dst.resolve()))
            say(f"added models.{new} to {path}")
    except (RegistryError, RuntimeError) as e:
        _fail(str(e))


@models_app.command("convert")
def convert(
    model: str = typer.Argument(..., help="Source model (a llama.cpp GGUF entry of models.yaml)."),
    to: str = typer.Option(..., "--to", help="Target format; only 'hf' (a Hugging Face folder for vLLM)."),
    out_path: Path | None = typer.Option(None, "--out", help="Output folder (default: under the rig cache)."),
    name: str | None = typer.Option(None, "--name", help="Name of the new models.yaml entry."),
    models_file: Path | None = typer.Option(None, "--models", help="models.yaml to read and append to."),
    register: bool = typer.Option(True, "--register/--no-register", help="Append the new entry to models.yaml."),
) -> None:
    """Dequantize a GGUF into a bf16 Hugging Face folder and register it as a vLLM entry. Offline."""
    from rig.convert import ConvertError, convert_gguf_to_hf, default_out_dir, hf_entry
    from rig.quantize import append_entry
    from rig.registry import RegistryError, default_registry_path, load_registry, resolve_weights

    if to != "hf":
        _fail(f"--to {to!r}: only 'hf' is supported")
    try:
        path = models_file or default_registry_path()
        spec = load_registry(path).get(model)
        if spec.engine != "llamacpp":
            _fail(f"{model}: convert reads llama.cpp GGUF models, this one uses {spec.engine}")
        src = Path(resolve_weights(spec, str(path)))
        new = name or f"{spec.base}-hf"
        dst = (out_path or default_out_dir(new, src)).resolve()
        t = time.perf_counter()
        convert_gguf_to_hf(src, dst, model=model)
        err.print(f"wrote {dst} in {time.perf_counter() - t:.1f}s")
        if register:
            append_entry(Path(path), new, hf_entry(spec, dst))
            err.print(f"added models.{new} to {path}")
    except (RegistryError, ConvertError) as e:
        _fail(str(e))


@app.command()
def compare(
    models_: list[str] = typer.Argument(
        ...,
        metavar="VARIANT...",
        help="Models, or MODEL@decode=json,tool_mode=native variants; the first is the baseline.",
    ),
    benchmark: str = typer.Option("callnavi", "--benchmark", "-b"),
    limit: int | None = typer.Option(None, "--limit", min=1),
    repeats: int = typer.Option(1, "--repeats", "-k", min=1),
    data: Path | None = typer.Option(None, "--data"),
    out_dir: Path = typer.Option(Path("runs"), "--out"),
    gpu: int | None = typer.Option(None, "--gpu"),
    decode: str = typer.Option(
        "none", "--decode", help="none, json or yaml; a list (none,json) runs every variant under each."
    ),
    tool_mode: str | None = typer.Option(
        None,
        "--tool-mode",
        help="Default: the --decode format, else prompt; a list (prompt,json) runs every variant under each.",
    ),
    option: list[str] = typer.Option([], "--option", "-O"),
    seed: int = typer.Option(0, "--seed", help="One seed for every variant, so episodes and sampling match."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1),
    models_file: Path | None = typer.Option(None, "--models"),
) -> None:
    """Run the same episodes on each variant (a model under a decode and tool mode) in its own process and compare
    them, paired: `rig compare a b`, `rig compare gemma3-270m --decode none,json`."""
    from rig.runs.bench import BenchError, BenchOptions
    from rig.runs.compare import expand_variants, run_compare, write_compare

    decodes = [d.strip() for d in decode.split(",") if d.strip()]
    for d in decodes:
        if d not in ("none", "json", "yaml"):
            _fail(f"--decode {d!r}: choose none, json or yaml")
    tool_modes = [_tool_mode(t.strip(), "none") for t in (tool_mode or "").split(",") if t.strip()]
    try:
        # One value is the command's mode for every variant; a list makes it an axis of the comparison.
        variants = expand_variants(
            models_, decodes if len(decodes) > 1 else None, tool_modes if len(tool_modes) > 1 else None
        )
        base_decode = decodes[0] if len(decodes) == 1 else "none"
        base_tool = tool_modes[0] if len(tool_modes) == 1 else None
        bo = BenchOptions(
            benchmark=benchmark,
            limit=limit,
            repeats=repeats,
            data=data,
            out=out_dir,
            gpu=gpu,
            decode=base_decode,
            tool_mode=_tool_mode(base_tool, base_decode),
            options=_parse_options(option),
            seed=seed,
            max_tokens=max_tokens,
            models_file=models_file.resolve() if models_file else None,
        )
        cdir, runs = run_compare(list(variants), bo, say=say)
    except BenchError as e:
        _fail(str(e))
    md = write_compare(cdir, runs)
    say(f"comparison: {cdir} (compare.md, compare.html; figures as SVG, PDF and PNG)")
    sys.stdout.write(md + "\n")


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
) -> None:
    """Run every cell of a sweep as its own `rig bench` process; skip finished cells, resume partial ones, retry
    dead ones; end with a leaderboard."""
    from rich.live import Live
    from rich.table import Table as RichTable

    from rig.sweep.leaderboard import write_leaderboard
    from rig.sweep.run import JobState, episode_counts, job_dir, run_sweep
    from rig.sweep.spec import SweepError, load_sweep

    try:
        spec, cells = load_sweep(sweep_file)
    except SweepError as e:
        _fail(str(e))
    out = out_dir or Path("runs") / f"sweep-{sweep_file.stem}"
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
    sys.stdout.write(md + "\n")
    if result.failed:
        err.print(f"{len(result.failed)} cell(s) failed: " + ", ".join(result.failed), highlight=False)
        raise typer.Exit(1)


@app.command()
def merge(
    shard_runs: list[Path] = typer.Argument(..., help="Run folders of shards 0..N-1 of one run (rig bench --shard)."),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="Where the merged run folder goes."),
) -> None:
    """Join the shards of one run into one run folder, as if one process had run every episode."""
    from rig.runformat import NewerFormatError
    from rig.runs.bench import BenchError
    from rig.sweep.merge import merge_runs

    try:
        run_dir = merge_runs(shard_runs, out_dir)
    except (BenchError, NewerFormatError, FileNotFoundError) as e:
        _fail(str(e))
    err.print(f"merged: {run_dir}", highlight=False)


@app.command("benchmarks")
def benchmarks_cmd(
    name: str | None = typer.Argument(None, help="One benchmark (default: all)."),
    write_readmes: bool = typer.Option(
        False,
        "--write-readmes",
        help="Rewrite the options table in each benchmarks/<name>/README.md of this source tree.",
    ),
) -> None:
    """List the benchmarks and their -O options (type, default, meaning), generated from each Options model."""
    import rig
    from rig.benchmarks import BENCHMARKS, get_benchmark_class, options_markdown, with_options_table

    names = [name] if name else sorted(BENCHMARKS)
    for n in names:
        if n not in BENCHMARKS:
            _fail(f"unknown benchmark {n!r}; available: {', '.join(sorted(BENCHMARKS))}")
    if write_readmes:
        for n in names:
            readme = Path(rig.__file__).resolve().parents[1] / "benchmarks" / n / "README.md"
            if not readme.is_file():
                _fail(f"{readme}: not found (--write-readmes works in a source checkout)")
            readme.write_text(with_options_table(readme.read_text(encoding="utf-8"), n), encoding="utf-8")
            say(f"wrote {readme}")
        return
    for n in names:
        about = (sys.modules[get_benchmark_class(n).__module__].__doc__ or "").strip().split("\n\n")[0]
        sys.stdout.write(
            f"## {n} (-O {n}.KEY=VALUE, or -O KEY=VALUE with -b {n})\n\n{about}\n\n{options_markdown(n)}\n\n"
        )


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


@app.command()
def runs(root: Path = typer.Argument(Path("runs"), help="Folder holding run folders.")) -> None:
    """List runs: id, model, benchmarks, status, episodes done / total, when."""
    from rig.runs.export import list_runs

    t = RichTable(title=escape(f"runs in {root}"))
    for c in ("run id", "model", "benchmarks", "status", "done / total", "started"):
        t.add_column(c)
    for r in list_runs(root):
        t.add_row(
            *(escape(str(c)) for c in (r.run_id, r.model, r.benchmarks, r.status, f"{r.done} / {r.total}", r.started))
        )
    out.print(t)


@app.command("export")
def export_cmd(
    run: Path = typer.Argument(..., help="Run directory."),
    fmt: str = typer.Option("csv", "--format", help="csv, jsonl or parquet."),
    to: Path | None = typer.Option(None, "--out", help="Output file (default: inside the run folder)."),
) -> None:
    """Write per-episode rows joined with their telemetry."""
    from rig.runs.export import export

    if not (run / "manifest.json").exists():
        _fail(f"{run}: no manifest.json (is this a run directory?)")
    try:
        path = export(run, fmt, to)
    except (ValueError, RuntimeError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"--out {e.filename or to}: cannot write the export ({e.strerror})")
    say(f"wrote {path}")


bundle_app = typer.Typer(
    help="Carry rig, weights, data and map packs to a machine with no network, verified.", no_args_is_help=True
)
app.add_typer(bundle_app, name="bundle")


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@bundle_app.command("create")
def bundle_create(
    out_dir: Path = typer.Argument(..., help="New folder for the bundle."),
    models_csv: str = typer.Option(
        DEFAULT_MODEL, "--models", help="models.yaml entries, comma-separated (a base name brings its variants)."
    ),
    benchmarks_csv: str | None = typer.Option(None, "--benchmarks", help="Comma-separated (default: all)."),
    extras_csv: str = typer.Option("llamacpp", "--extras", help="rig extras (engines), comma-separated."),
    python: str | None = typer.Option(None, "--python", help="Target Python, e.g. 3.11 (default: this one)."),
    plat: str | None = typer.Option(
        None, "--platform", help="Target pip platform tag(s), e.g. manylinux_2_28_x86_64 (default: here)."
    ),
    models_file: Path | None = typer.Option(None, "--models-file", help="models.yaml to read entries from."),
    wheels: bool = typer.Option(
        True, "--wheels/--no-wheels", help="Collect wheels with pip (needs an index or --find-links)."
    ),
    build: bool = typer.Option(
        True, "--build/--no-build", help="Compile source-only packages here when the target is this machine."
    ),
    requires: list[str] = typer.Option(
        [],
        "--require",
        help="Extra requirement installed beside rig (repeatable), e.g. torch==2.13.0 for a CPU torch.",
    ),
    find_links: list[Path] = typer.Option([], "--find-links", help="Local wheel folder for pip (repeatable)."),
    no_index: bool = typer.Option(False, "--no-index", help="pip uses --find-links only."),
    maps: bool = typer.Option(True, "--maps/--no-maps", help="Include the built map packs the benchmarks use."),
    data: list[str] = typer.Option(
        [],
        "--data",
        help="NAME=PATH: a chosen benchmark's own data folder or file, checked and bundled instead of its "
        "embedded data (repeatable).",
    ),
) -> None:
    """Make a bundle: wheels, weights, models.yaml, benchmark data, map packs, MANIFEST.json, README."""
    from rig.benchmarks import BENCHMARKS
    from rig.bundle import BundleError, CreateOptions, create, parse_data_flags

    try:
        user_data = parse_data_flags(data)
    except BundleError as e:
        _fail(str(e))
    opts = CreateOptions(
        out=out_dir,
        models=_csv(models_csv),
        extras=_csv(extras_csv),
        requires=requires,
        python=python,
        platform=plat,
        benchmarks=_csv(benchmarks_csv) if benchmarks_csv else sorted(BENCHMARKS),
        models_file=models_file,
        wheels=wheels,
        build=build,
        find_links=find_links,
        no_index=no_index,
        maps=maps,
        data=user_data,
    )
    try:
        man = create(opts)
    except BundleError as e:
        _fail(str(e))
    for note in man.not_copied:
        err.print(f"[yellow]not copied:[/] {note}", highlight=False, soft_wrap=True)
    size = sum(f.size for f in man.files)
    out.print(f"bundle {man.bundle_id}: {len(man.files)} files, {size / 1e6:.1f} MB in {out_dir}")


@bundle_app.command("verify")
def bundle_verify(bundle: Path = typer.Argument(..., help="Bundle folder.")) -> None:
    """Re-hash every file against MANIFEST.json; name missing, extra and altered files (exit 2)."""
    from rig.bundle import BundleError, verify

    try:
        rep = verify(bundle)
    except BundleError as e:
        _fail(str(e))
    for kind, paths in (("missing", rep.missing), ("extra", rep.extra), ("altered", rep.altered)):
        for p in paths:
            err.print(f"[bold red]{kind}:[/] {bundle / p}", highlight=False, soft_wrap=True)
    if not rep.ok:
        _fail(
            f"bundle {rep.bundle_id}: {len(rep.missing)} missing, {len(rep.extra)} extra, "
            f"{len(rep.altered)} altered file(s)"
        )
    out.print(f"bundle {rep.bundle_id}: {rep.checked} files verified")


@bundle_app.command("install")
def bundle_install(
    bundle: Path = typer.Argument(..., help="Bundle folder."),
    venv: Path = typer.Option(..., "--venv", help="New virtual environment to create."),
    extras_csv: str | None = typer.Option(None, "--extras", help="Extras to install (default: the bundle's)."),
) -> None:
    """Create a venv from the bundle's wheels alone (no index), then run `rig doctor` on the bundle's registry."""
    from rig.bundle import BundleError, bundle_env, install

    try:
        code = install(bundle, venv, _csv(extras_csv) if extras_csv is not None else None)
    except BundleError as e:
        _fail(str(e))
    env = " ".join(f"{k}={v}" for k, v in bundle_env(bundle).items())
    out.print(f"installed into {venv}; run with: {env} {venv}/bin/rig bench", highlight=False, soft_wrap=True)
    if code:
        raise typer.Exit(code)


@app.command()
def rescore(
    benchmark: str = typer.Argument(..., help="callnavi or mobilitybench."),
    predictions: list[Path] = typer.Argument(..., help="Prediction files in the reference harness's own format."),
    mode: str = typer.Option("paper", "--mode", help="Metric mode of the main tables: paper or reference."),
    data: Path | None = typer.Option(None, "--data", help="The benchmark data the predictions answer."),
    label: str | None = typer.Option(None, "--label", help="Model name in the tables (default: from the files)."),
    out_dir: Path = typer.Option(Path("runs"), "--out", help="Where the run folder is written."),
    option: list[str] = typer.Option([], "--option", "-O", help="Benchmark option key=value (repeatable)."),
) -> None:
    """Score predictions made outside rig (CallNavi output files, MobilityBench raw_results.json) into a run folder."""
    from rich.progress import Progress

    from rig.runs.rescore import RESCORABLE, RescoreError, RescoreOptions, rescore

    if benchmark not in RESCORABLE:
        _fail(f"rescore: benchmark {benchmark!r} is not supported; choose {' or '.join(RESCORABLE)}")
    if mode not in ("paper", "reference"):
        _fail(f"--mode {mode!r}: choose paper or reference")
    opts = RescoreOptions(
        benchmark=benchmark,  # type: ignore[arg-type]  # a str from typer; pydantic refuses other names
        predictions=predictions,
        data=data,
        mode=mode,  # type: ignore[arg-type]
        label=label,
        out=out_dir,
        options=_parse_options(option),
    )
    try:
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("writing results", total=None)
            run_dir = rescore(opts, progress=lambda i, n: bar.update(task, completed=i, total=n))
    except RescoreError as e:
        _fail(str(e))
    err.print(f"wrote {run_dir}; next: rig report {run_dir} --html")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
