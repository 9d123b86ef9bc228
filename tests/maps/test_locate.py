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


@pytest.mark.parametrize("damage", ["no-pack-json", "garbage-pack-json", "a-file"])
def test_a_damaged_cached_pack_is_rebuilt_in_its_place(
    damage: str, helsinki_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache's own pack damaged (its pack.json gone or garbage, or a file in its place): every EVGeoQA and
    UrbanGeoEval run ended in "Directory not empty" (the rebuilt pack could not be renamed onto it). Now it is moved
    aside and the fresh one takes its place; `rig doctor -b evgeoqa` reads its episodes from it."""
    import os
    import subprocess
    import sys

    from rig.maps.pack_format import read_info

    cache = tmp_path / "cache"
    out = cache / "packs" / helsinki_pack.name
    if damage == "a-file":
        out.parent.mkdir(parents=True)
        out.write_text("not a pack")
    else:
        shutil.copytree(helsinki_pack, out)
        if damage == "no-pack-json":
            (out / "pack.json").unlink()
        else:
            (out / "pack.json").write_text("{not json")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "RIG_CACHE": str(cache)}
    env.pop("RIG_PACKS", None)
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "doctor", "-b", "evgeoqa"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert "Directory not empty" not in r.stdout + r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    row = next(line for line in r.stdout.splitlines() if "evgeoqa embedded sample" in line)
    assert "│ ok " in row and "questions" in row, r.stdout
    assert read_info(out).format_version >= 1
    assert sorted(p.name for p in out.parent.iterdir()) == [helsinki_pack.name]  # nothing left aside
    monkeypatch.setenv("RIG_CACHE", str(cache))
    monkeypatch.delenv("RIG_PACKS", raising=False)
    assert helsinki_pack_dir() == out
