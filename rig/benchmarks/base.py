"""The benchmark interface. Every benchmark yields Episodes and turns EpisodeResults into tables.

Single-turn benchmarks are one-turn episodes run by the single-call agent; agentic ones override
``run_episode`` with a tool loop. There is no second code path in the runner.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rig.engines.base import Engine
from rig.records import Episode, EpisodeResult, Sampling


class DataError(Exception):
    """Missing or corrupt benchmark data; str() names the file and the field."""


def embedded_data(rel: str, marker: str, what: str, flag: str = "--data PATH") -> Path:
    """Data shipped with rig: ``benchmarks/<rel>`` beside the package (editable install) or ``rig/data/benchmarks/
    <rel>`` inside the wheel; ``marker`` is a file (or ".") that must exist there."""
    pkg = Path(__file__).resolve().parents[1]
    for cand in (pkg.parent / "benchmarks" / rel, pkg / "data" / "benchmarks" / rel):
        if (cand / marker).exists():
            return cand
    raise DataError(f"the embedded {what} is missing from this install; pass {flag}")


class Table(BaseModel):
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""


class RunContext(BaseModel):
    """What a benchmark needs to know about the run to build requests."""

    sampling: Sampling
    decode: str = "none"  # none | json | yaml
    tool_mode: str = "prompt"


class Benchmark(abc.ABC):
    name: str = ""
    version: str = "0"

    def __init__(self, data: Path | None = None, options: dict[str, Any] | None = None) -> None:
        self.data = Path(data) if data else self.default_data()
        self.options = dict(options or {})

    @classmethod
    def default_data(cls) -> Path:
        """The embedded sample that ships with rig."""
        raise NotImplementedError

    @abc.abstractmethod
    def episodes(self) -> list[Episode]: ...

    @abc.abstractmethod
    def data_hash(self) -> str: ...

    @abc.abstractmethod
    async def run_episode(self, episode: Episode, engine: Engine, ctx: RunContext, repeat: int) -> EpisodeResult: ...

    @abc.abstractmethod
    def tables(self, results: list[EpisodeResult], episodes: list[Episode] | None = None) -> list[Table]: ...

    def settings(self) -> dict[str, Any]:
        """Effective settings that shape every episode (step budgets, frameworks), defaults included, for the
        manifest: options record only what the user passed."""
        return {}

    def headline(self, result: EpisodeResult) -> float | None:
        """The one per-episode score used for confidence intervals and comparisons."""
        return None
