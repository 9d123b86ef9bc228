"""What identifies a run: the settings that must not change between a run and its resumption."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, model_validator

from rig.records import hash_view
from rig.registry import ModelSpec
from rig.runfolder.spec import RunSettings, setting

if TYPE_CHECKING:
    from rig.benchmarks.base import Benchmark


class BenchmarkInfo(BaseModel):
    name: str
    version: str
    data_path: str
    data_hash: str
    options: dict[str, Any] = Field(default_factory=dict)  # the benchmark's validated Options, defaults included
    episodes: int = 0

    @classmethod
    def of(cls, bench: Benchmark, episodes: int) -> BenchmarkInfo:
        """The record of a loaded benchmark: its data, their hash and its validated options."""
        return cls(
            name=bench.name,
            version=bench.version,
            data_path=str(bench.data),
            data_hash=bench.data_hash(),
            options=bench.opts.model_dump(mode="json"),
            episodes=episodes,
        )


# Validation errors a record may hold anyway: a value outside what a request may ask (rig rescore records tool mode
# "external" and max_tokens 0, not recorded), never one of another type.
_OUT_OF_BOUNDS = {"literal_error", "greater_than", "greater_than_equal", "less_than", "less_than_equal"}


class RunConfig(RunSettings):
    """What must not change between a run and its resumption; hashed into config_hash: the model as resolved from
    models.yaml, each benchmark's data and options, and the run's settings as resolved (the sampling ones are the
    model's effective values). A new field of RunSettings is recorded and hashed here without an edit."""

    # A record, not a request: rig merge clears the shard of the run it joins, and a manifest from a rig with more
    # settings reads without them, as it did before RunConfig was a RunSettings.
    model_config = ConfigDict(frozen=False, extra="ignore")

    model: ModelSpec
    benchmarks: list[BenchmarkInfo]

    @classmethod
    def of(cls, model: ModelSpec, benchmarks: list[BenchmarkInfo], spec: RunSettings) -> RunConfig:
        """The record of a run of ``spec`` on ``model`` (which already carries the sampling overrides): its settings,
        the first rigs' sampling ones (temperature, seed, max_tokens) resolved to the model's effective values. A
        sampling setting added later (`Setting.when_set`) is recorded as asked, so it stays out of the hash unless
        set; its effective value is the model's, which the hash holds too."""
        resolved = {n for n, f in RunSettings.model_fields.items() if not setting(f).when_set}
        settings = spec.model_dump(include=set(RunSettings.model_fields))
        return cls(model=model, benchmarks=benchmarks, **(settings | model.sampling.model_dump(include=resolved)))

    @model_validator(mode="wrap")
    @classmethod
    def _as_recorded(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A record reads back as it was written, even a setting no request could ask for; a value of the wrong type
        (a damaged manifest) is still refused."""
        try:
            return handler(data)
        except ValidationError as e:
            errors = e.errors()
            bad = {str(err["loc"][0]) for err in errors if err["loc"]}
            if (
                not isinstance(data, dict)
                or any(err["type"] not in _OUT_OF_BOUNDS or len(err["loc"]) != 1 for err in errors)
                or not bad <= set(RunSettings.model_fields)
            ):
                raise
            config = handler({k: v for k, v in data.items() if k not in bad})
            config.__dict__.update({k: data[k] for k in bad})
            config.__pydantic_fields_set__.update(bad)
            return config

    def digest(self) -> str:
        # Settings and record fields added after hashes existed (`Setting.when_set`: the shard; `records.Since`:
        # weights.parts, sampling.min_p, ...) are left out while at their default, so the hashes of runs made before
        # them still match on resume.
        unset = {
            name
            for name, f in RunSettings.model_fields.items()
            if setting(f).when_set and getattr(self, name) == f.get_default(call_default_factory=True)
        }
        fields = {k: v for k, v in hash_view(self).items() if k not in unset}
        for b in fields["benchmarks"]:
            # BenchmarkInfo had a `settings` field (always {} since typed options); runs recorded with it still
            # resume because the hash keeps it.
            b["settings"] = {}
        blob = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
