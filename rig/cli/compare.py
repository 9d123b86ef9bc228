"""`rig compare`: the same episodes on several variants, paired."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rig.cli.common import app, fail, parse_options, say, tool_mode_for


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
            fail(f"--decode {d!r}: choose none, json or yaml")
    tool_modes = [tool_mode_for(t.strip(), "none") for t in (tool_mode or "").split(",") if t.strip()]
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
            tool_mode=tool_mode_for(base_tool, base_decode),
            options=parse_options(option),
            seed=seed,
            max_tokens=max_tokens,
            models_file=models_file.resolve() if models_file else None,
        )
        cdir, runs = run_compare(list(variants), bo, say=say)
    except BenchError as e:
        fail(str(e))
    md = write_compare(cdir, runs)
    say(f"comparison: {cdir} (compare.md, compare.html; figures as SVG, PDF and PNG)")
    sys.stdout.write(md + "\n")
