"""The sweep tests' cells run the engine `fake` and the benchmark `mapped` (tests/sweep/fake_cell.py), installed as
plugins: their entry points in tests/sweep/plugins/, seen by this process and every process it starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig import plugins
from tests.conftest import REPO

SITE = Path(__file__).parent / "plugins"


def plugin_path() -> str:
    """PYTHONPATH for a process that sees the plugins: their metadata, and the repository that holds the code."""
    return os.pathsep.join([str(SITE), str(REPO)])


def install_cell_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugins seen by this process (until the test ends) and by every process it starts."""
    monkeypatch.syspath_prepend(str(SITE))
    monkeypatch.setenv("PYTHONPATH", plugin_path())
    plugins.discover.cache_clear()


@pytest.fixture(autouse=True)
def cell_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    install_cell_plugins(monkeypatch)
    yield
    plugins.discover.cache_clear()
