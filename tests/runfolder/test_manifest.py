"""The manifest records the run's RunSpec; --resume reads it back; a manifest from before RunSpec goes through the
one upgrade path (RunManifest.run_spec)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.cli import app
from rig.execution.bench import BenchOptions, resume_options
from rig.runfolder.manifest import RunManifest
from rig.runfolder.spec import RunSpec

FIXTURE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"
MODELS = (
    "models:\n  fake:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: none\n"
    "    context_length: 4096\n"
)


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    """A finished two-question CallNavi run of a fake model (the engine answers at once); its folder's parent."""
    from rig.execution import bench
    from tests.execution.killable import ThreadedFakeEngine

    monkeypatch.setenv("KILLABLE_DELAY", "0")
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: ThreadedFakeEngine(spec, weights))
    (tmp_path / "models.yaml").write_text(MODELS)
    (tmp_path / "w.gguf").write_bytes(b"")
    reg = ["--models", str(tmp_path / "models.yaml")]
    out = tmp_path / "runs"
    flags = ["--model", "fake", "-b", "callnavi", "-O", "task=routing", "--decode", "yaml", "--limit", "2"]
    r = CliRunner().invoke(app, ["bench", *reg, *flags, "--out", str(out), "--no-report"])
    assert r.exit_code == 0, r.output
    return reg, out


def test_the_manifest_records_the_spec_as_asked(fake_run: tuple[list[str], Path]) -> None:
    _reg, out = fake_run
    (run,) = out.iterdir()
    spec = RunManifest.read(run).spec
    assert spec is not None
    assert spec.model == "fake" and spec.benchmark == "callnavi" and spec.options == {"task": "routing"}
    assert spec.decode == "yaml" and spec.tool_mode == "yaml" and spec.limit == 2 and spec.temperature is None


def test_resume_takes_unset_settings_from_the_recorded_spec() -> None:
    man = RunManifest.read(FIXTURE)
    recorded = RunSpec(model="m", benchmark="callnavi", options={"task": "routing"}, decode="yaml", limit=3, gpu=1)
    man = man.model_copy(update={"spec": recorded})
    got = resume_options(BenchOptions(resume="x", limit=5), man)
    assert got.model == "m" and got.decode == "yaml" and got.tool_mode == "yaml" and got.gpu == 1
    assert got.limit == 5  # given: kept, so the changed configuration is refused
    assert got.options == {"task": "routing"}


def test_a_manifest_without_a_spec_is_read_through_the_upgrade_path() -> None:
    spec = RunManifest.read(FIXTURE).run_spec()
    assert spec == RunSpec(
        model="gemma3-270m",
        options={"callnavi.format": "json", "mobilitybench.similarity": "jaccard"},
        decode="json",
        tool_mode="json",
        limit=2,
        repeats=1,
        seed=0,
        temperature=0.0,
        max_tokens=96,
        order="grouped",
    )


def test_an_older_run_still_resumes(fake_run: tuple[list[str], Path]) -> None:
    reg, out = fake_run
    (run,) = out.iterdir()
    raw = json.loads((run / "manifest.json").read_text())
    del raw["spec"]  # as written before RunSpec existed
    (run / "manifest.json").write_text(json.dumps(raw))
    base = ["bench", *reg, "--resume", run.name, "--out", str(out), "--no-report"]
    r = CliRunner().invoke(app, [*base, "--limit", "3"])
    assert r.exit_code == 2 and "configuration changed" in r.output and "limit:" in r.output, r.output
    r = CliRunner().invoke(app, base)
    assert r.exit_code == 0, r.output
    assert RunManifest.read(run).status == "finished"


def test_old_benchmark_settings_are_dropped_on_read(tmp_path: Path) -> None:
    """`settings` (what runs wrote before typed options; read by nothing) is accepted from an older manifest and
    dropped by the one upgrade path: neither the record nor a manifest written back holds it."""
    raw = json.loads((FIXTURE / "manifest.json").read_text())
    assert any(b["settings"] for b in raw["config"]["benchmarks"])  # the fixture holds some
    man = RunManifest.read(FIXTURE)
    assert all("settings" not in b.model_dump() for b in man.config.benchmarks)
    man.write(tmp_path)
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert all("settings" not in b for b in written["config"]["benchmarks"])


def test_config_hash_is_unchanged_for_runs_recorded_with_settings() -> None:
    """A run recorded while BenchmarkInfo had `settings` (always {} for new runs) still resumes: the same
    configuration hashes as it did then (digests computed by the code before the field went)."""
    from rig.runfolder.config import RunConfig

    model = {"name": "m", "base": "m", "engine": "llamacpp", "weights": {"file": "w.gguf"}, "quantization": "q4"}
    bench = {"name": "callnavi", "version": "1", "data_path": "d", "data_hash": "h", "options": {"format": "json"}}
    run = {"repeats": 1, "limit": None, "decode": "none", "tool_mode": "prompt", "seed": 0, "temperature": 0.0}
    cfg = RunConfig.model_validate(
        {"model": {**model, "context_length": 64}, "benchmarks": [{**bench, "episodes": 2}], **run}
        | {"max_tokens": 96, "gpu": None}
    )
    assert cfg.digest() == "f3d9609838fe1f05"
    assert cfg.model_copy(update={"shard": "0/2"}).digest() == "54b0765425a07dd9"
