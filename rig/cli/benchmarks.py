"""`rig benchmarks`: each benchmark's -O options, generated from its Options model."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rig.cli.common import app, fail, say


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
            fail(f"unknown benchmark {n!r}; available: {', '.join(sorted(BENCHMARKS))}")
    if write_readmes:
        from rig.records import write_atomic

        for n in names:
            readme = Path(rig.__file__).resolve().parents[1] / "benchmarks" / n / "README.md"
            if not readme.is_file():
                fail(f"{readme}: not found (--write-readmes works in a source checkout)")
            write_atomic(readme, with_options_table(readme.read_text(encoding="utf-8"), n))
            say(f"wrote {readme}")
        return
    for n in names:
        about = (sys.modules[get_benchmark_class(n).__module__].__doc__ or "").strip().split("\n\n")[0]
        sys.stdout.write(
            f"## {n} (-O {n}.KEY=VALUE, or -O KEY=VALUE with -b {n})\n\n{about}\n\n{options_markdown(n)}\n\n"
        )
