"""MANIFEST.json as runs see it: the bundle id a run records is computed from the manifest it read, and a manifest
beside models.yaml that cannot be read stops `rig bench` with the path named (exit 2), before a run folder exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.bundle import BundleError, bundle_id_for, verify
from rig.cli import app
from tests.bundle.helpers import create_bundle


@pytest.fixture
def bundle(registry: Path, tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    res = create_bundle(registry, out, models="tiny-q4")
    assert res.exit_code == 0, res.output
    return out


def _bench(bundle: Path, runs: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    from rig.benchmarks.callnavi.benchmark import CallNavi
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine

    data = bundle / "data" / "callnavi"
    monkeypatch.setattr(
        "rig.execution.bench.create_engine", lambda spec, weights, gpu=None: FakeEngine(oracle(CallNavi(data)))
    )
    args = ["bench", "-m", "tiny-q4", "-b", "callnavi", "--data", str(data), "--limit", "1"]
    args += ["--models", str(bundle / "models.yaml"), "--out", str(runs), "--no-report"]
    res = CliRunner().invoke(app, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, " ".join(res.output.split())


def test_a_run_records_the_computed_id_not_the_claimed_one(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rig.runfolder.manifest import RunManifest

    made = verify(bundle).bundle_id
    raw = json.loads((bundle / "MANIFEST.json").read_text())
    raw["bundle_id"] = made  # claims to be the bundle that was made...
    raw["requires"] = ["numpy==1.0"]  # ...but is not
    (bundle / "MANIFEST.json").write_text(json.dumps(raw))
    runs = tmp_path / "runs"
    code, text = _bench(bundle, runs, monkeypatch)
    assert code == 0, text
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    recorded = RunManifest.read(run_dir).bundle_id
    assert recorded == verify(bundle).bundle_id == bundle_id_for(bundle / "models.yaml")
    assert recorded != made


@pytest.mark.parametrize("bad", ["deep", "folder", "not-json", "fifo"])
def test_an_unreadable_manifest_beside_models_yaml_stops_bench_naming_it(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    import os

    man = bundle / "MANIFEST.json"
    man.unlink()
    if bad == "deep":
        man.write_text('{"bundle_id": ' + "[" * 50_000 + "]" * 50_000 + "}")
    elif bad == "folder":
        man.mkdir()
    elif bad == "fifo":
        os.mkfifo(man)
    else:
        man.write_text("{not json")
    with pytest.raises(BundleError, match=r"MANIFEST\.json"):
        bundle_id_for(bundle / "models.yaml")
    runs = tmp_path / "runs"
    code, text = _bench(bundle, runs, monkeypatch)
    assert code == 2 and str(man) in text, text
    assert not runs.exists() or not any(runs.iterdir())  # no run folder left behind


def test_no_manifest_means_no_bundle(registry: Path) -> None:
    assert bundle_id_for(registry) is None
