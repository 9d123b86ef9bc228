"""`rig compare`: the same episodes on several variants, paired."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, get_args

import typer

from rig.benchmarks import DEFAULT_BENCHMARK
from rig.cli.common import (
    allow_host_option,
    app,
    bench_flags,
    experiment_option,
    fail,
    mlflow_option,
    mlflow_ready,
    print_markdown,
    say,
    spec_list,
    spec_option,
    stops_cleanly,
    to_mlflow,
)
from rig.paths import RUNS
from rig.records import DEFAULT_DIVERGENCE_TOP_K, DivergenceTopK
from rig.runfolder.spec import DECODES

if TYPE_CHECKING:
    from rig.analyses.compare_run import DivergenceAsk


@app.command()
def compare(
    ctx: typer.Context,
    models_: list[str] | None = typer.Argument(
        None,
        metavar="VARIANT...",
        help="Models, or MODEL@decode=json,tool_mode=native variants; the first is the baseline.",
    ),
    benchmark: str = spec_option("benchmark", "-b", default=DEFAULT_BENCHMARK, help="Benchmark to compare on."),
    limit: int | None = spec_option("limit"),
    repeats: int = spec_option("repeats", "-k"),
    data: Path | None = spec_option("data"),
    out_dir: Path = typer.Option(RUNS, "--out", help="Where run folders and the comparison go."),
    gpu: int | None = spec_option("gpu"),
    decode: str = spec_option(
        "decode", help=f"{', '.join(DECODES)}; a list (none,json) runs every variant under each."
    ),
    tool_mode: str | None = spec_option(
        "tool_mode",
        default=None,
        help="Default: the --decode format, else prompt; a list (prompt,json) runs every variant under each.",
    ),
    option: list[str] = spec_option("options", "-O", default=[]),
    seed: int | None = spec_option("seed", help="One seed for every variant, so episodes and sampling match."),
    temperature: float | None = spec_option("temperature"),
    max_tokens: int | None = spec_option("max_tokens"),
    models_file: Path | None = spec_option("models_file"),
    pass_k: str | None = spec_option("pass_k"),
    runs_: list[Path] = typer.Option(
        [], "--run", help="Compare existing run folders of one benchmark instead of running variants (repeat it)."
    ),
    divergence: bool = typer.Option(
        False,
        "--divergence",
        help="Teacher-force every variant on the reference's stored replies: token-level KLD per token class.",
    ),
    reference: str | None = typer.Option(
        None, "--reference", help="The reference variant for --divergence (a model name; default: the first)."
    ),
    top_k: int | None = typer.Option(  # declared once, with its bounds: rig.records.DivergenceTopK
        None,
        "--top-k",
        help=get_args(DivergenceTopK)[1].description + f" Default {DEFAULT_DIVERGENCE_TOP_K}.",
        show_default=False,
    ),
    resume: str | None = typer.Option(
        None,
        "--resume",
        help="A comparison id (folder in --out) that was stopped: finished variants' runs are kept, the others run or "
        "resume, then the divergence pass when it was asked; with its recorded settings (give no other flag).",
    ),
    mlflow: str | None = mlflow_option(),
    experiment: str = experiment_option(),
    allow_host: list[str] = allow_host_option(),
) -> None:
    """Run the same episodes on each variant (a model under a decode and tool mode) in its own process and compare
    them, paired: `rig compare a b`, `rig compare gemma3-270m --decode none,json`."""
    from rig.analyses.compare_run import DivergenceAsk

    mlflow_ready(mlflow, allow_host)
    sink = (mlflow, experiment, allow_host)
    if resume is not None:
        _resume(ctx, resume, out_dir, sink)
        return
    top_k = _top_k(divergence, reference, top_k)
    models_path = str(models_file.resolve()) if models_file else None
    ask = DivergenceAsk(reference=reference, top_k=top_k, models_file=models_path) if divergence else None
    if runs_:
        if models_:
            fail("give either VARIANT... to run or --run folders to compare, not both")
        _compare_runs(out_dir, runs_, ask, sink)
        return
    if not models_:
        fail("name the variants to compare (VARIANT...), or existing run folders with --run")
    cdir, runs = _run_variants(ctx, models_, option, out_dir, ask)
    _finish(cdir, runs, ask, sink)


def _compare_runs(
    out_dir: Path, runs: list[Path], ask: DivergenceAsk | None, sink: tuple[str | None, str, list[str]]
) -> None:
    """``--run``: a comparison of existing run folders, nothing run."""
    from rig.analyses.compare import compare_folder
    from rig.execution.bench import BenchError

    try:
        cdir = compare_folder(out_dir, runs)
    except BenchError as e:
        fail(str(e))
    _finish(cdir, runs, ask, sink, fresh=True)


def _resume(ctx: typer.Context, resume: str, out_dir: Path, sink: tuple[str | None, str, list[str]]) -> None:
    from rig.analyses.compare_run import resume_compare
    from rig.execution.bench import BenchError

    _refuse_flags_with_resume(ctx, resume)
    try:
        with stops_cleanly("nothing new kept; run the command again"):
            cdir, runs, plan = resume_compare(resume, out_dir, say=say)
    except BenchError as e:
        fail(str(e))
    _finish(cdir, runs, plan.divergence, sink)


def _run_variants(
    ctx: typer.Context, models_: list[str], option: list[str], out_dir: Path, ask: DivergenceAsk | None
) -> tuple[Path, list[Path]]:
    """Each axis (decode, tool mode) as a list: one value is the command's for every variant, more make it an axis
    of the comparison. The other run flags by their names in ctx.params, as `rig bench` takes them."""
    from rig.analyses.compare import expand_variants
    from rig.analyses.compare_run import run_compare
    from rig.execution.bench import BenchError, bench_options
    from rig.runfolder.spec import SpecError, axes

    lists = {axis: spec_list(axis, ctx.params[axis] or "") for axis in axes()}
    modes = {axis: values[0] for axis, values in lists.items() if len(values) == 1}
    try:
        variants = expand_variants(models_, *(values if len(values) > 1 else None for values in lists.values()))
        params = {k: v for k, v in ctx.params.items() if k not in lists} | modes
        bo = bench_options({**bench_flags(params, option, absolute_models=True), "out": out_dir})
        with stops_cleanly("no variant was started; run the command again"):  # a started one's Stopped says more
            return run_compare(list(variants), bo, say=say, divergence=ask)
    except (BenchError, SpecError) as e:
        fail(str(e))


# Flags that are no setting of the comparison: where it goes and where it is logged.
_NOT_SETTINGS = {"resume", "out_dir", "mlflow", "experiment", "allow_host"}


def _refuse_flags_with_resume(ctx: typer.Context, resume: str) -> None:
    """`--resume` goes on as the comparison's plan.json records it: a variant or setting given again is refused,
    naming it, rather than silently ignored or mixed into runs made under the recorded one."""
    given = [
        "VARIANT..." if p.param_type_name == "argument" else p.opts[0]
        for p in ctx.command.params
        if p.name not in _NOT_SETTINGS
        and getattr(ctx.get_parameter_source(p.name or ""), "name", "DEFAULT") != "DEFAULT"
    ]
    if given:
        fail(
            f"--resume {resume}: goes on with the comparison's recorded variants and settings; drop "
            + ", ".join(given)
            + " (or start a new comparison)"
        )


def _top_k(divergence: bool, reference: str | None, top_k: int | None) -> int:
    """--top-k (its default when not given); it and --reference only with --divergence, checked before any variant
    runs."""
    if not divergence and (reference is not None or top_k is not None):
        fail(f"{'--reference' if reference is not None else '--top-k'} only applies with --divergence")
    top_k = DEFAULT_DIVERGENCE_TOP_K if top_k is None else top_k
    if divergence:
        from rig.analyses.divergence.records import DivergenceError, check_top_k

        try:
            check_top_k(top_k)
        except DivergenceError as e:
            fail(str(e))
    return top_k


def _finish(
    cdir: Path,
    runs: list[Path],
    ask: DivergenceAsk | None,
    sink: tuple[str | None, str, list[str]],
    fresh: bool = False,
) -> None:
    """compare.md and compare.html; with --divergence the divergence pass first, in a process of its own. A failed or
    stopped pass over existing runs (``fresh``) leaves no comparison folder; after variants ran, a failed pass keeps
    their comparison without the divergence section, and a stop says how to resume."""
    from rig.analyses.compare import write_compare
    from rig.analyses.compare_run import resume_hint
    from rig.analyses.divergence.view import divergence_section
    from rig.runformat import NewerFormatError, RunFileError

    hint = "no comparison written; run the command again"
    if not fresh:
        hint = f"the variants' runs are kept; resume with: {resume_hint(cdir)}"
    try:
        with stops_cleanly(hint):
            section, problem = _divergence(cdir, runs, ask, fresh)
            try:
                md = write_compare(cdir, runs, extra=section, extra_html=divergence_section(cdir))
            except (NewerFormatError, RunFileError) as e:
                fail(str(e))
    except BaseException:
        if fresh:  # a comparison of existing runs that stopped, failed or was refused leaves no folder behind
            shutil.rmtree(cdir, ignore_errors=True)
        raise
    say(f"comparison: {cdir} (compare.md, compare.html; figures as SVG, PDF and PNG)")
    print_markdown(md)
    mlflow, experiment, allow = sink
    if mlflow is not None:
        from rig.integrations.mlflow import compare_group

        to_mlflow(mlflow, experiment, allow, group=compare_group(cdir, runs))
    if problem:
        fail(f"divergence: {problem}")


def _divergence(cdir: Path, runs: list[Path], ask: DivergenceAsk | None, fresh: bool) -> tuple[str | None, str | None]:
    """The divergence section (None without --divergence) and the pass's problem, if it failed; a failed pass over
    existing runs (``fresh``) removes the comparison folder and fails."""
    from rig.analyses.divergence.records import DivergenceError
    from rig.analyses.divergence.run import run_divergence

    if ask is None:
        return None, None
    models = Path(ask.models_file) if ask.models_file else None
    try:
        return run_divergence(cdir, runs, ask.reference, models, ask.top_k), None
    except DivergenceError as e:
        if fresh:
            shutil.rmtree(cdir, ignore_errors=True)
            fail(f"divergence: {e}")
        return None, str(e)
