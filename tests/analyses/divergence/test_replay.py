"""A run stored before Sampling gained a field (tests/fixtures/run_before_min_p: made with that rig, a fake engine,
CallNavi's embedded sample): it still resumes, and the divergence pass's replay rebuilds requests whose hashes are the
stored ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rig.analyses.divergence.replay import replay_pairs
from rig.engines.base import Capabilities
from rig.execution import bench
from rig.execution.bench import BenchOptions, run_bench
from rig.records import Sampling
from rig.runfolder.folder import RunFolder
from tests.execution.test_bench_efficiency import DecodingEngine

REPO = Path(__file__).resolve().parents[3]
FIXTURE = REPO / "tests" / "fixtures" / "run_before_min_p"
# The entry the run was made with (its data path is recorded relative to the repository).
MODELS = (
    "models:\n  tiny:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: q8_0\n"
    "    context_length: 4096\n    sampling: {temperature: 0.0, top_p: 0.9, top_k: 40, max_tokens: 64, seed: 0, "
    "stop: ['</s>']}\n"
)


class StoredEngine:
    """What the replay asks of the reference engine when the tool mode is prompt: its spec and capabilities."""

    def __init__(self, run: Path) -> None:
        self.spec, self.weights, self.args = RunFolder(run).manifest.config.model, "w.gguf", None
        self.capabilities = Capabilities()

    def parse_native_calls(self, text: str, request: object) -> list[object]:
        return []

    def count_tokens(self, text: str) -> None:
        return None


@pytest.fixture
def old_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    assert {"min_p", "repeat_penalty"} <= set(Sampling.model_fields)  # fields this run's rig did not have
    recorded = json.loads((FIXTURE / "manifest.json").read_text())["config"]["model"]["sampling"]
    assert "min_p" not in recorded and "repeat_penalty" not in recorded
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "runs" / json.loads((FIXTURE / "manifest.json").read_text())["run_id"]
    shutil.copytree(FIXTURE, run)
    return run


def test_a_run_from_before_a_sampling_field_resumes(old_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = RunFolder(old_run)
    assert folder.manifest.config.digest() == folder.manifest.config_hash == "cbc84e256ca5ec49"
    (old_run.parent / "models.yaml").write_text(MODELS)
    (old_run.parent / "w.gguf").write_bytes(b"GGUF")
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: DecodingEngine(spec, weights))
    opts = BenchOptions(resume=old_run.name, out=old_run.parent, models_file=old_run.parent / "models.yaml")
    assert run_bench(opts) == old_run  # refused, it would raise "the configuration changed since the run started"
    assert RunFolder(old_run).manifest.config_hash == "cbc84e256ca5ec49"


def test_its_divergence_replay_rebuilds_the_stored_request_hashes(old_run: Path) -> None:
    pairs, skipped, mismatches, results = replay_pairs(old_run, StoredEngine(old_run))
    assert len(results) == 4 and not skipped
    assert mismatches == []  # every replayed request hashes as the stored generation recorded it
    assert len(pairs) == sum(len(r.generations) for r in results)
