"""Wheels for `pip --no-index`: rig's own, its extras' dependencies, and source-only packages with their build
requirements."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from rig.bundle.files import rel_path, say
from rig.bundle.manifest import BundleError, CreateOptions, WheelSource

# Packages published only as source archives: bundled as sdist plus build requirements, and built here when the
# target is this machine.
SOURCE_ONLY = ("llama-cpp-python",)


def _pip(args: list[str], what: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    say(f"$ pip {' '.join(args)}")
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
    for tag in (plat or host_platform()).split(","):
        flags += ["--platform", tag]
    return [*flags, "--only-binary=:all:"]


def host_platform() -> str:
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


def collect_wheels(opts: CreateOptions, src_root: Path) -> list[WheelSource]:
    """rig's wheel, every dependency of the chosen extras and the requirements (the model packages among them), for
    the target."""
    from rig.doctor import PORTABLE_CMAKE_ARGS

    wheels = opts.out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    index = [a for d in opts.find_links for a in ("--find-links", str(d))] + (["--no-index"] if opts.no_index else [])
    _pip(["wheel", "--no-deps", "-w", str(wheels), *index, str(src_root)], "building the rig wheel")
    reqs = list(dict.fromkeys(project_requirements(src_root, opts.extras) + opts.requires))
    source_only = [r for r in reqs if _req_name(r) in SOURCE_ONLY]
    binary = [r for r in reqs if _req_name(r) not in SOURCE_ONLY]
    sources: list[WheelSource] = []
    src_dir = wheels / "src"
    for req in source_only:
        # Only this package as source: ":all:" also makes pip compile its build tools (CMake) from source, a long
        # build before the bundle has started (still running after 90 minutes on two shared cores).
        _pip(
            ["download", "--no-deps", "--no-binary", _req_name(req), "-d", str(src_dir), *index, req],
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
                sdist=rel_path(sdist, opts.out),
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
            say(f"$ CMAKE_ARGS='{env['CMAKE_ARGS']}' pip wheel {s.sdist} (compiles; minutes)")
            if subprocess.run(cmd, env=env).returncode != 0:
                raise BundleError(
                    f"building {s.package} from {s.sdist} failed (rerun with --no-build to ship the sdist only)"
                )
            built = sorted(set(wheels.glob("*.whl")) - before)
            s.built_wheel = rel_path(built[0], opts.out) if built else None
            s.note = (
                f"wheel built here for this machine's platform (CMAKE_ARGS={env['CMAKE_ARGS']}); the sdist and "
                "build requirements are included to rebuild on another CPU"
            )
    return sources
