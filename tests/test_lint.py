"""pyflakes over the package, tests and scripts: unused names and imports are how dead code starts."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_clean() -> None:
    api = pytest.importorskip("pyflakes.api")
    reporter_mod = pytest.importorskip("pyflakes.reporter")
    out, err = io.StringIO(), io.StringIO()
    files = sorted(p for d in ("rig", "tests", "scripts") for p in (ROOT / d).rglob("*.py"))
    assert files
    count = sum(api.checkPath(str(p), reporter_mod.Reporter(out, err)) for p in files)
    assert count == 0, out.getvalue() + err.getvalue()
