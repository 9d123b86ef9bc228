"""`rig trajectory`: an EVGeoQA episode of a real run folder drawn as its GeoRover trajectory, read through
RunFolder (the benchmark's plot module only draws)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.benchmarks.evgeoqa.benchmark import EVGeoQA
from rig.cli import app
from rig.runfolder.folder import RunFolder
from tests.benchmarks.evgeoqa.explorer import ScriptedExplorer
from tests.fakes import FakeEngine

MODELS = (
    "models:\n  fake:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: none\n"
    "    context_length: 4096\n"
)


@pytest.fixture
def run(tmp_path: Path, helsinki_pack: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from rig.execution.bench import BenchOptions, run_bench

    bench = EVGeoQA(options={"locations": "10"})
    ds = bench.dataset()
    explorer = ScriptedExplorer({q.question: q.categories for q in ds.queries}, ds.setting, bench.world().extent)
    monkeypatch.setattr("rig.execution.bench.create_engine", lambda spec, weights, gpu=None: FakeEngine(explorer))
    (tmp_path / "models.yaml").write_text(MODELS)
    (tmp_path / "w.gguf").write_bytes(b"")
    opts = BenchOptions(
        model="fake",
        models_file=tmp_path / "models.yaml",
        benchmark="evgeoqa",
        options={"locations": "10"},
        limit=3,
        out=tmp_path / "runs",
    )
    return run_bench(opts)


def test_rig_trajectory_draws_the_first_episode_that_moved(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "trajectory.svg"
    r = CliRunner().invoke(app, ["trajectory", str(run), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert str(out) in r.output
    results = RunFolder(run).results("evgeoqa")
    moved = next((x for x in results if x.output["trace"]["moves"]), results[0])
    root = ET.fromstring(out.read_text())
    ns = "{http://www.w3.org/2000/svg}"
    assert len([e for e in root.iter(f"{ns}line") if e.get("marker-end")]) == len(moved.output["trace"]["moves"])
    # a named episode is drawn; one the run does not hold is named in the error
    first = results[0].episode_id
    r = CliRunner().invoke(app, ["trajectory", str(run), "--episode", first, "--out", str(tmp_path / "one.svg")])
    assert r.exit_code == 0 and (tmp_path / "one.svg").is_file()
    r = CliRunner().invoke(app, ["trajectory", str(run), "--episode", "nope", "--out", str(tmp_path / "x.svg")])
    assert r.exit_code == 2 and "no episode 'nope' at repeat 0 to draw" in r.output
    assert not (tmp_path / "x.svg").exists()


def test_a_damaged_manifest_is_named_not_read_raw(run: Path, tmp_path: Path) -> None:
    (run / "manifest.json").write_text('{"run_id": 3}')
    r = CliRunner().invoke(app, ["trajectory", str(run), "--out", str(tmp_path / "t.svg")])
    assert r.exit_code == 2 and f"{run / 'manifest.json'}: damaged manifest" in r.output
