"""What identifies a run: the settings that must not change between a run and its resumption."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from rig.registry import ModelSpec

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


class RunConfig(BaseModel):
    """What must not change between a run and its resumption; hashed into config_hash."""

    model: ModelSpec
    benchmarks: list[BenchmarkInfo]
    repeats: int
    limit: int | None
    decode: str
    tool_mode: str
    seed: int
    temperature: float
    max_tokens: int
    gpu: int | None
    shard: str | None = None  # "i/N": this run holds shard i of N of the episodes (rig sweep); None: all of them

    def digest(self) -> str:
        # An unsharded run leaves `shard` out, so hashes of runs made before shards existed still match on resume.
        fields = self.model_dump(mode="json", exclude={"shard"} if self.shard is None else None)
        for b in fields["benchmarks"]:
            # BenchmarkInfo had a `settings` field (always {} since typed options); runs recorded with it still
            # resume because the hash keeps it.
            b["settings"] = {}
        blob = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
