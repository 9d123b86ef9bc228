"""Finding map packs: a bundle's prebuilt packs (RIG_PACKS) are used as they are, and nothing is written there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rig.maps.locate import helsinki_pack_dir
from rig.paths import cache_dir


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_prebuilt_pack_is_found_read_only_before_the_cache(
    helsinki_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packs = tmp_path / "bundle" / "cache" / "packs"
    shutil.copytree(helsinki_pack, packs / helsinki_pack.name)
    before = _tree(packs)
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("RIG_PACKS", str(tmp_path / "no-such-folder") + ":" + str(packs))
    assert helsinki_pack_dir() == packs / helsinki_pack.name
    assert not cache_dir().exists()  # nothing built or copied into the machine's cache
    assert _tree(packs) == before


def test_a_damaged_prebuilt_pack_is_passed_over(
    helsinki_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packs = tmp_path / "packs"
    (packs / helsinki_pack.name).mkdir(parents=True)  # no pack.json: not a pack
    monkeypatch.setenv("RIG_PACKS", str(packs))
    assert helsinki_pack_dir() == helsinki_pack  # the cache's pack (the session fixture's RIG_CACHE)
