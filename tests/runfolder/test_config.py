"""RunConfig's hash is what `--resume` compares and what earlier run folders recorded: pinned to the values the rig
before RunConfig embedded RunSpec computed, so a restructuring of the settings never strands a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.registry import ModelSpec, Weights
from rig.runfolder.config import BenchmarkInfo, RunConfig
from rig.runfolder.manifest import RunManifest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"


def _config(**settings: object) -> RunConfig:
    model = ModelSpec(
        name="m",
        base="m",
        engine="llamacpp",
        weights=Weights(file="m.gguf"),
        quantization="q4_0",
        context_length=4096,
    )
    info = BenchmarkInfo(name="callnavi", version="1", data_path="/d", data_hash="h", options={"task": "routing"})
    fields: dict[str, object] = dict(
        repeats=2, limit=3, decode="json", tool_mode="json", seed=7, temperature=0.5, max_tokens=96, gpu=None
    )
    return RunConfig.model_validate({"model": model, "benchmarks": [info], **fields, **settings})


# Computed on the rig before this change (main at 952fc05; weights.parts in ModelSpec changed every hash there) for
# the same configurations.
@pytest.mark.parametrize(
    "settings, digest",
    [
        ({}, "96880405da63e1cb"),
        ({"shard": "1/3"}, "7f04572dbfe1c01a"),
        ({"gpu": 0, "limit": None, "tool_mode": "prompt"}, "e4eb3c2262839dbb"),
        ({"tool_mode": "external", "max_tokens": 0, "limit": None}, "91819efb8cae3482"),  # rig rescore's record
    ],
)
def test_the_hash_of_a_known_configuration_is_unchanged(settings: dict[str, object], digest: str) -> None:
    assert _config(**settings).digest() == digest


def test_the_hash_of_a_recorded_run_is_unchanged() -> None:
    config = RunManifest.read(FIXTURE).config
    assert config.digest() == "6ed1a6a58b2f50a9"
    assert config.model_copy(update={"shard": "1/3"}).digest() == "f0fc47a189909a24"


def test_a_record_no_run_spec_could_ask_for_reads_back(tmp_path: Path) -> None:
    """rig rescore records tool mode 'external' and max_tokens 0 (not recorded): a record of what ran, read as
    written, not refused like a request would be."""
    config = _config(tool_mode="external", max_tokens=0)
    RunManifest.begin("r", config).write(tmp_path)
    back = RunManifest.read(tmp_path).config
    assert back == config and back.digest() == config.digest()


def test_a_record_with_a_setting_this_rig_does_not_know_reads() -> None:
    """A later rig records its new settings in the configuration; this one reads the rest, as it always did."""
    data = _config().model_dump(mode="json") | {"top_p": 0.5}
    assert RunConfig.model_validate(data) == _config()
