"""A bundle of a plugin's benchmark or engine carries the plugin's distribution: its wheel, pinned among the bundle's
requirements and installed at the lab; offline without that wheel, `rig bundle create` refuses naming it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig import plugins
from rig.bundle import read_manifest
from tests.bundle.helpers import create_bundle, fake_pip
from tests.test_plugins import MODELS, TOY, TOY_ENTRY_POINTS, _dist_files, write_wheel

PIN = "toy-sums==0.1"
WHEEL = "toy_sums-0.1-py3-none-any.whl"


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy plugin installed here (a site folder on sys.path), its wheel in tmp_path/index, and a models.yaml
    whose model `toy` runs on the plugin's engine; returns the models.yaml."""
    import sys

    site = tmp_path / "site"
    for path, text in _dist_files("toy-sums", {"toy_sums.py": TOY}, TOY_ENTRY_POINTS).items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    (tmp_path / "index").mkdir()
    write_wheel(tmp_path / "index", "toy_sums", {"toy_sums.py": TOY}, TOY_ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    plugins.discover.cache_clear()
    registry = tmp_path / "models.yaml"
    registry.write_text(MODELS)
    yield registry
    plugins.discover.cache_clear()
    sys.modules.pop("toy_sums", None)


def test_a_plugin_travels_as_its_wheel_and_is_installed_at_the_lab(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rig.bundle.wheels

    calls: list[list[str]] = []
    monkeypatch.setattr(rig.bundle.wheels, "_pip", fake_pip(tmp_path / "index", calls))
    out = tmp_path / "bundle"
    offline = ("--no-index", "--find-links", str(tmp_path / "index"), "--extras", "plots")
    res = create_bundle(toy, out, *offline, models="toy", benchmarks="sums", wheels=True)
    assert res.exit_code == 0, res.output
    man = read_manifest(out)
    # The benchmark and the engine come from one distribution: pinned once, downloaded with rig's wheels, hashed.
    assert man.requires == [PIN] and man.benchmarks == ["sums"]
    (download,) = [c for c in calls if c[0] == "download"]
    assert PIN in download
    assert f"wheels/{WHEEL}" in {f.path for f in man.files}
    assert f"'{PIN}'" in (out / "README.md").read_text()
    # `rig bundle install` hands pip the pin with the bundle's verified wheels as its only source.
    import rig.bundle.lab as lab

    handed: list[tuple[list[str], list[str]]] = []

    def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
        if "install" in cmd:
            links = Path(cmd[cmd.index("--find-links") + 1])
            handed.append((cmd, sorted(p.name for p in links.iterdir())))
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(lab.subprocess, "run", run)
    assert lab.install(out, tmp_path / "venv") == 0
    ((cmd, offered),) = handed
    assert "--no-index" in cmd and PIN in cmd[cmd.index("--") + 1 :] and WHEEL in offered


def test_offline_without_the_plugins_wheel_create_refuses_naming_the_distribution(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rig.bundle.wheels

    calls: list[list[str]] = []
    monkeypatch.setattr(rig.bundle.wheels, "_pip", fake_pip(tmp_path / "index", calls))
    out = tmp_path / "bundle"
    elsewhere = tmp_path / "wheelhouse"
    elsewhere.mkdir()
    # rig's own benchmark on the plugin's engine: the engine alone needs the distribution too
    res = create_bundle(toy, out, "--no-index", "--find-links", str(elsewhere), models="toy", wheels=True)
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert "engine 'sum_engine' of model 'toy'" in said and "from toy-sums 0.1" in said
    assert f"the bundle must carry toy-sums 0.1, and no wheel of it is in --find-links ({elsewhere})" in said
    assert "pip wheel --no-deps -w DIR" in said and "pass --find-links DIR" in said
    assert not out.exists() and calls == []  # refused before any pip work or copying
    index = ("--no-index", "--find-links", str(tmp_path / "index"), "--extras", "plots")
    res = create_bundle(toy, out, *index, models="toy", wheels=True)
    assert res.exit_code == 0, res.output  # its wheel supplied: carried
    assert read_manifest(out).requires == [PIN]


def test_without_wheels_the_plugin_is_named_as_what_the_lab_must_install(toy: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    res = create_bundle(toy, out, models="toy", benchmarks="sums")
    assert res.exit_code == 0, res.output
    man = read_manifest(out)
    assert man.requires == [PIN]
    assert any(n.startswith("wheels: not collected") and PIN in n for n in man.not_copied), man.not_copied


def test_rigs_own_benchmarks_and_engines_need_no_plugin(toy: Path, tmp_path: Path) -> None:
    from rig.bundle.plugins import plugin_dists
    from rig.registry import load_registry
    from tests.bundle.helpers import make_registry

    (tmp_path / "own").mkdir()
    reg = load_registry(make_registry(tmp_path / "own"))
    assert plugin_dists(["callnavi", "routeeval"], [reg.get("tiny-q4"), reg.get("tiny-hf")]) == []
    (dist,) = plugin_dists(["callnavi", "sums"], [load_registry(toy).get("toy")])
    assert dist.requirement == PIN and dist.needed_by.startswith("benchmark 'sums' (benchmark plugin 'sums'")
