"""`rig bundle install`: the lab side, a fresh venv from the bundle's wheels alone, checked by `rig doctor`."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rig.bundle.check import verified
from rig.bundle.files import say
from rig.bundle.manifest import EXTRA_NAME, MANIFEST, BundleError, BundleFile, open_regular


def install(
    bundle: Path, venv: Path, extras: list[str] | None = None, expect: str | None = None, key: Path | None = None
) -> int:
    """A fresh venv from the bundle's wheels only, then `rig doctor` on its registry and data; returns doctor's code.

    The bundle is verified first (with ``expect`` and ``key`` as `verify` takes them): pip runs the build backend of
    any source archive it finds, so nothing of the bundle reaches pip before every file is known."""
    if os.path.lexists(venv) and (venv.is_symlink() or not venv.is_dir()):
        raise BundleError(f"--venv {venv}: exists and is not a folder")
    if venv.exists() and any(venv.iterdir()):
        raise BundleError(f"--venv {venv}: exists and is not empty")
    for extra in extras or []:
        if not EXTRA_NAME.fullmatch(extra):
            raise BundleError(f"--extras {extra}: not an extra's name")
    report, man = verified(bundle, expect=expect, key=key)
    if not report.ok:
        offenders = report.unsafe + report.altered + report.missing + report.extra
        named = ", ".join(offenders[:3]) + (f" and {len(offenders) - 3} more" if len(offenders) > 3 else "")
        raise BundleError(
            f"{bundle}: does not verify, nothing installed ({report.summary()}{': ' + named if named else ''}); "
            "`rig bundle verify` lists every offender"
        )
    host_py = f"{sys.version_info.major}.{sys.version_info.minor}"
    if man.python != host_py:
        raise BundleError(
            f"{bundle / MANIFEST}: python: the bundle targets Python {man.python}, this is {host_py}; "
            f"run `rig bundle install` with a Python {man.python} interpreter"
        )
    wheels = bundle / "wheels"
    listed = [f for f in man.files if f.path.startswith("wheels/")]
    if not any(f.path.startswith("wheels/rig-") and f.path.endswith(".whl") for f in listed):
        raise BundleError(f"{wheels}: no rig wheel (was the bundle made with --no-wheels?)")
    say(f"creating {venv}")
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)])
    if made.returncode != 0:
        raise BundleError(f"--venv {venv}: python -m venv exited with {made.returncode} (see its message above)")
    want = extras if extras is not None else man.extras
    spec = f"rig[{','.join(want)}]" if want else "rig"
    with tempfile.TemporaryDirectory(prefix="rig-bundle-wheels-") as tmp:
        # pip reads copies hashed as they were made: a file swapped in the bundle after verify never reaches it.
        copied = Path(tmp) / "wheels"
        copy_verified(bundle, listed, "wheels/", copied)
        # The bundle alone: no pip.conf and no PIP_* setting of the machine (a lab's stale mirror, find-links) may
        # add packages; the isolated builds inherit this environment too.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(copied),
            "PIP_CONFIG_FILE": os.devnull,
        }
        # requires are requirement specifiers (checked when the manifest is read); `--` keeps pip from reading any
        # positional argument as an option.
        cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--find-links", str(copied), "--"]
        cmd += [spec, *man.requires]
        say("$ " + " ".join(cmd[2:]))
        if subprocess.run(cmd, env=env).returncode != 0:
            raise BundleError(f"pip install from {wheels} (verified copy) failed (see pip's message above)")
    return doctor(bundle, venv)


def copy_verified(bundle: Path, files: list[BundleFile], prefix: str, dest: Path) -> None:
    """Copy the listed ``files`` under ``prefix`` to ``dest``, each hashed as it is read (regular files only, no
    link followed); any that differs from the manifest now is a BundleError naming it."""
    for f in files:
        target = dest / f.path.removeprefix(prefix)
        target.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        try:
            with os.fdopen(open_regular(bundle / f.path), "rb") as src, open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    out.write(chunk)
        except OSError as e:
            raise BundleError(f"{bundle / f.path}: cannot be read ({e.strerror})") from None
        if h.hexdigest() != f.sha256:
            raise BundleError(f"{bundle / f.path}: changed since it was verified; nothing installed from it")


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
    from rig.benchmarks import DEFAULT_BENCHMARK

    if (bundle / "data" / DEFAULT_BENCHMARK).is_dir():  # the benchmark whose data `rig doctor` checks
        cmd += ["--data", str(bundle / "data" / DEFAULT_BENCHMARK)]
    say("$ " + " ".join(cmd))
    return subprocess.run(cmd, env=env).returncode
