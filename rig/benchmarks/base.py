"""The benchmark interface. Every benchmark yields Episodes and turns EpisodeResults into tables.

Single-turn benchmarks are one-turn episodes run by the single-call agent; agentic ones override
``run_episode`` with a tool loop. There is no second code path in the runner.
"""

from __future__ import annotations

import abc
import json
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


def read_json(path: Path) -> Any:
    """A benchmark's JSON file; a missing or broken file is a DataError naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None


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
    OPTIONS: tuple[str, ...] = ()  # the -O keys this benchmark reads; any other key is refused

    def __init__(self, data: Path | None = None, options: dict[str, Any] | None = None) -> None:
        self.data = Path(data) if data else self.default_data()
        self.options = dict(options or {})
        self.check_options()

    def check_options(self) -> None:
        unknown = set(self.options) - set(self.OPTIONS)
        if unknown:
            raise DataError(f"{self.name}: unknown option(s) {sorted(unknown)}; known: {', '.join(self.OPTIONS)}")

    def int_option(self, key: str, default: int, minimum: int | None = None) -> int:
        raw = self.options.get(key, default)
        try:
            v = int(raw)
        except (TypeError, ValueError):
            raise DataError(f"{self.name} option {key}: {raw!r} is not an integer") from None
        if minimum is not None and v < minimum:
            raise DataError(f"{self.name} option {key}: {v} is below {minimum} (must be at least {minimum})")
        return v

    def choice_option(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        v = str(self.options.get(key, default))
        if v not in allowed:
            raise DataError(f"{self.name} option {key}: {v!r} is not one of {', '.join(allowed)}")
        return v

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
