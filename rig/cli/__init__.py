"""`rig` command line: one module per command, each thin over the library (flags in, a library call, printing).

Importing a command's module registers it on `app`; the order here is the order of `rig --help`.
"""

from __future__ import annotations

from rig.cli import bench, report  # noqa: F401  (registers the commands)
from rig.cli.bench import print_screen
from rig.cli.common import app, say, tool_mode_for
from rig.maps.cli import app as maps_app  # typer only at import: the map libraries load inside commands

app.add_typer(maps_app, name="maps")

from rig.cli import models, compare, sweep, benchmarks, doctor, runs, bundle, rescore  # noqa: E402, F401, I001

__all__ = ["app", "main", "print_screen", "say", "tool_mode_for"]


def main() -> None:
    app()
