"""The places rig reads and writes outside a run folder, declared once: the rig cache (map packs, converted
weights, bandwidth probes, MobilityBench's replay stores; `RIG_CACHE`, else the XDG cache), the folders of prebuilt
map packs a bundle provides (`RIG_PACKS`, read only), and where commands put run folders unless told.

Only the standard library is imported: every layer may use it."""

from __future__ import annotations

import os
from pathlib import Path

RUNS = Path("runs")  # the default --out of every command that writes run folders


def cache_dir() -> Path:
    """``RIG_CACHE`` if set, else the XDG cache directory's ``rig``; shared by every checkout and run on the host."""
    root = os.environ.get("RIG_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "rig"
    )
    return Path(root)


def pack_dirs() -> list[Path]:
    """``RIG_PACKS``: folders of prebuilt packs (a bundle's), searched before the cache and never written to."""
    return [Path(p) for p in os.environ.get("RIG_PACKS", "").split(os.pathsep) if p]
