"""A plugin benchmark without a gold agent (installed by tests/cli/test_selftest.py through tests/cli/plugins/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.benchmarks.base import Benchmark, RunContext, Table
from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult


class NoGold(Benchmark):
    name = "nogold"

    @classmethod
    def default_data(cls) -> Path:
        return Path(".")

    def episodes(self) -> list[Episode]:
        return []

    def data_hash(self) -> str:
        return "0"

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        raise AssertionError("a benchmark without gold is never run by the self-test")

    @classmethod
    def tables(cls, results: list[EpisodeResult], options: Any, label: str = "") -> list[Table]:
        return []
