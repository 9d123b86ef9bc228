"""`rig bundle install`: the lab side, a fresh venv from the bundle's wheels alone, checked by `rig doctor`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rig.bundle.files import _say
from rig.bundle.manifest import MANIFEST, BundleError, read_manifest


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
