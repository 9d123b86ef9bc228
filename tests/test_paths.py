"""The shared places outside a run folder, declared once in rig/paths.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rig.paths import cache_dir, pack_dirs

ROOT = Path(__file__).resolve().parents[1] / "rig"


def test_the_cache_is_rig_cache_else_xdg_else_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("RIG_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "rig"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "rig"


def test_prebuilt_pack_folders_in_order_empty_entries_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_PACKS", "/a::/b/c:")
    assert pack_dirs() == [Path("/a"), Path("/b/c")]
    monkeypatch.delenv("RIG_PACKS")
    assert pack_dirs() == []


def test_no_module_but_rig_paths_reads_the_shared_locations() -> None:
    """The cache and pack variables are read, and the default runs folder spelled, only in rig/paths.py; the cache
    is imported from there (not through a module that uses it)."""
    read = re.compile(
        r"environ(\.get\(|\[)\s*\"(RIG_CACHE|RIG_PACKS|XDG_CACHE_HOME)\"|Path\(\"runs\"\)"
        r"|(?<!rig\.paths) import .*\bcache_dir\b"
    )
    found = [
        f"{p.relative_to(ROOT.parent)}:{n}"
        for p in sorted(ROOT.rglob("*.py"))
        if p != ROOT / "paths.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if read.search(line)
    ]
    assert found == []
