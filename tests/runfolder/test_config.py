"""RunConfig's hash is what `--resume` compares and what earlier run folders recorded: pinned to the values the rig
before RunConfig embedded RunSpec computed, so a restructuring of the settings never strands a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.records import Sampling, Since
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


# Computed on the rig before this change (83b1d4d, before weights.parts existed; main at 952fc05 hashed an unset
# weights.parts too, which changed every run's hash) for the same configurations.
@pytest.mark.parametrize(
    "settings, digest",
    [
        ({}, "e17d82ff7ec474b9"),
        ({"shard": "1/3"}, "a9e4c628658b49ce"),
        ({"gpu": 0, "limit": None, "tool_mode": "prompt"}, "b09519935f2a2e22"),
        ({"tool_mode": "external", "max_tokens": 0, "limit": None}, "1d87ce2b7741ea53"),  # rig rescore's record
    ],
)
def test_the_hash_of_a_known_configuration_is_unchanged(settings: dict[str, object], digest: str) -> None:
    assert _config(**settings).digest() == digest


def test_the_hash_of_a_recorded_run_is_unchanged() -> None:
    config = RunManifest.read(FIXTURE).config
    assert config.digest() == "3ae601cf3cff7c0e"
    assert config.model_copy(update={"shard": "1/3"}).digest() == "286b8124a0a8dffa"


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


def test_a_parts_model_is_hashed_with_its_parts() -> None:
    """An unset weights.parts is left out of the hash (runs from before it resume); a set one is in it."""
    parts = {"packages": ["m-part-1", "m-part-2"], "version": "1.0", "size": 10, "sha256": "0" * 64, "file": "m.gguf"}
    base = _config()
    model = base.model.model_copy(update={"weights": Weights.model_validate({"parts": parts})})
    with_parts = base.model_copy(update={"model": model})
    assert with_parts.digest() != base.digest()
    changed = model.model_copy(update={"weights": Weights.model_validate({"parts": {**parts, "version": "1.1"}})})
    assert base.model_copy(update={"model": changed}).digest() != with_parts.digest()


# Computed on the rig before Sampling gained min_p and repeat_penalty (records.Since), for a model whose sampling sets
# every field it then had.
SAMPLED = {"temperature": 0.7, "top_p": 0.9, "top_k": 40, "max_tokens": 96, "seed": 3, "stop": ["</s>"]}


def test_a_sampling_field_added_later_changes_no_earlier_hash_and_enters_it_when_set() -> None:
    config = _config()
    config = config.model_copy(
        update={"model": config.model.model_copy(update={"sampling": Sampling(**SAMPLED)}), "seed": 3}
    )
    assert config.digest() == "a47d755b35a0b302"
    for field, value in (("min_p", 0.05), ("repeat_penalty", 1.1)):
        sampling = Sampling(**SAMPLED, **{field: value})
        changed = config.model_copy(update={"model": config.model.model_copy(update={"sampling": sampling})})
        assert changed.digest() != config.digest()


def test_every_later_field_of_a_hashed_record_is_optional_and_unset_by_default() -> None:
    """What keeps earlier hashes: a `Since` field's default is None, which hash_view leaves out."""
    later = {
        (record.__name__, name): next(m for m in f.metadata if isinstance(m, Since)).version
        for record in (Sampling, Weights)
        for name, f in record.model_fields.items()
        if any(isinstance(m, Since) for m in f.metadata)
    }
    assert {("Sampling", "min_p"), ("Sampling", "repeat_penalty"), ("Weights", "parts")} <= set(later)
    for record, name in later:
        assert {"Sampling": Sampling, "Weights": Weights}[record].model_fields[name].default is None, name
        assert later[record, name] > 1, name  # 1: the fields hashes held before Since existed
