"""`rig` command line: one module per command, each thin over the library (flags in, a library call, printing).

Importing a command's module registers it on `app`; the order here is the order of `rig --help`.
"""

from __future__ import annotations

from rig.cli import bench, report
from rig.cli.bench import print_screen
from rig.cli.common import app, say
from rig.maps.cli import app as maps_app  # typer only at import: the map libraries load inside commands

app.add_typer(maps_app, name="maps")

from rig.cli import models, compare, load, sweep, benchmarks, doctor, runs, bundle, rescore, selftest  # noqa: E402, I001

# The command modules are listed so that importing them (which registers them) reads as used.
__all__ = [
    "app",
    "bench",
    "benchmarks",
    "bundle",
    "compare",
    "doctor",
    "load",
    "main",
    "models",
    "print_screen",
    "report",
    "rescore",
    "runs",
    "say",
    "selftest",
    "sweep",
]


def main() -> None:
    app()
