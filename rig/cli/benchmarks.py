"""`rig benchmarks`: each benchmark's -O options, generated from its Options model."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from rig.cli.common import app, fail, print_markdown, say


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
    from rig import plugins
    from rig.benchmarks import benchmark_names, get_benchmark_class, options_markdown, with_options_table
    from rig.plugins import PluginError

    names = [name] if name else benchmark_names()
    for n in names:
        if n not in benchmark_names():
            fail(f"unknown benchmark {n!r}; available: {', '.join(benchmark_names())}")
    if write_readmes:
        own = plugins.own(plugins.BENCHMARK_GROUP)
        from rig.records import write_atomic

        if name is not None and name not in own:
            fail(f"{name}: a plugin's README belongs to its own package, not to this source tree")
        for n in [n for n in names if n in own]:
            readme = Path(rig.__file__).resolve().parents[1] / "benchmarks" / n / "README.md"
            if not readme.is_file():
                fail(f"{readme}: not found (--write-readmes works in a source checkout)")
            write_atomic(readme, with_options_table(readme.read_text(encoding="utf-8"), n))
            say(f"wrote {readme}")
        return
    for n in names:
        try:
            about = (sys.modules[get_benchmark_class(n).__module__].__doc__ or "").strip().split("\n\n")[0]
        except PluginError as e:
            if name is not None:
                fail(str(e))
            say(f"warning: {e} (left out)")
            continue
        print_markdown(f"## {n} (-O {n}.KEY=VALUE, or -O KEY=VALUE with -b {n})\n\n{about}\n\n{options_markdown(n)}\n")
