"""Plugin benchmarks for tests/cli/test_selftest.py (installed through tests/cli/plugins/): one without a gold agent,
one whose episodes crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.agents.scripted import Answer, Player
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


class CrashGold(NoGold):
    """A plugin benchmark with a gold agent whose episodes raise."""

    name = "crashgold"

    def episodes(self) -> list[Episode]:
        return [Episode(benchmark=self.name, id="e1", messages=[])]

    def gold(self, episode: Episode, ctx: RunContext) -> Player:
        return lambda _request: Answer("x", "text")

    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult:
        raise RuntimeError("this plugin's scorer broke")
