"""What identifies a run: the settings that must not change between a run and its resumption."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

from rig.registry import ModelSpec


class BenchmarkInfo(BaseModel):
    name: str
    version: str
    data_path: str
    data_hash: str
    options: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)  # effective settings, defaults included
    episodes: int = 0


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

    def digest(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]
