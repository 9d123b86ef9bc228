"""`rig compare`: the same episodes on several variants, paired."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import typer

from rig.cli.common import app, csv_list, fail, parse_options, say, tool_mode_for


@app.command()
def compare(
    models_: list[str] | None = typer.Argument(
        None,
        metavar="VARIANT...",
        help="Models, or MODEL@decode=json,tool_mode=native variants; the first is the baseline.",
    ),
    benchmark: str = typer.Option("callnavi", "--benchmark", "-b"),
    limit: int | None = typer.Option(None, "--limit"),
    repeats: int = typer.Option(1, "--repeats", "-k"),
    data: Path | None = typer.Option(None, "--data"),
    out_dir: Path = typer.Option(Path("runs"), "--out"),
    gpu: int | None = typer.Option(None, "--gpu", help="A position in CUDA_VISIBLE_DEVICES; CPU when omitted."),
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
    max_tokens: int | None = typer.Option(None, "--max-tokens"),
    models_file: Path | None = typer.Option(None, "--models"),
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
) -> None:
    """Run the same episodes on each variant (a model under a decode and tool mode) in its own process and compare
    them, paired: `rig compare a b`, `rig compare gemma3-270m --decode none,json`."""
    from rig.runs.bench import BenchError, bench_options
    from rig.runs.compare import compare_folder, expand_variants, run_compare
    from rig.runs.spec import DECODES, SpecError

    if runs_:
        if models_:
            fail("give either VARIANT... to run or --run folders to compare, not both")
        try:
            cdir = compare_folder(out_dir, runs_)
        except BenchError as e:
            fail(str(e))
        _finish(cdir, runs_, divergence, reference, models_file, fresh=True)
        return
    if not models_:
        fail("name the variants to compare (VARIANT...), or existing run folders with --run")

    decodes = csv_list(decode)
    for d in decodes:
        if d not in DECODES:
            fail(f"--decode {d!r}: choose {', '.join(DECODES)}")
    tool_modes = [tool_mode_for(t, "none") for t in csv_list(tool_mode or "")]
    try:
        # One value is the command's mode for every variant; a list makes it an axis of the comparison.
        variants = expand_variants(
            models_, decodes if len(decodes) > 1 else None, tool_modes if len(tool_modes) > 1 else None
        )
        flags = dict(
            benchmark=benchmark,
            limit=limit,
            repeats=repeats,
            data=data,
            out=out_dir,
            gpu=gpu,
            decode=decodes[0] if len(decodes) == 1 else "none",
            tool_mode=tool_modes[0] if len(tool_modes) == 1 else None,
            options=parse_options(option),
            seed=seed,
            max_tokens=max_tokens,
            models_file=models_file.resolve() if models_file else None,
        )
        bo = bench_options({k: v for k, v in flags.items() if v is not None})
        cdir, runs = run_compare(list(variants), bo, say=say)
    except (BenchError, SpecError) as e:
        fail(str(e))
    _finish(cdir, runs, divergence, reference, models_file)


def _finish(
    cdir: Path,
    runs: list[Path],
    divergence: bool,
    reference: str | None,
    models_file: Path | None,
    fresh: bool = False,
) -> None:
    """compare.md and compare.html; with --divergence the divergence pass first, in a process of its own. A failed
    pass over existing runs (``fresh``) leaves no comparison folder; after variants ran, their comparison is kept
    without the divergence section."""
    from rig.runformat import NewerFormatError, RunFileError
    from rig.runs.compare import write_compare
    from rig.runs.divergence import DivergenceError, run_divergence
    from rig.runs.divergence_view import divergence_section

    section, problem = None, None
    if divergence:
        try:
            section = run_divergence(cdir, runs, reference, models_file.resolve() if models_file else None)
        except DivergenceError as e:
            problem = str(e)
            if fresh:
                shutil.rmtree(cdir, ignore_errors=True)
                fail(f"divergence: {problem}")
    try:
        md = write_compare(cdir, runs, extra=section, extra_html=divergence_section(cdir))
    except (NewerFormatError, RunFileError) as e:
        fail(str(e))
    say(f"comparison: {cdir} (compare.md, compare.html; figures as SVG, PDF and PNG)")
    sys.stdout.write(md + "\n")
    if problem:
        fail(f"divergence: {problem}")
