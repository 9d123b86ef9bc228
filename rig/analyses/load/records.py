"""The typed records of a load test: its settings, one level's result, the verdict and the report."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field, field_validator

from rig.analyses.load.slo import LOAD_FORMAT, Slo, levels_problem
from rig.execution.bench import BenchOptions


class LoadSettings(BaseModel):
    """What `rig load` was asked: the run (`bench`; its own concurrency is replaced by each level), the levels, the
    SLOs and the non-inferiority margin (in headline-score units: 0.05 = five points of accuracy)."""

    bench: BenchOptions
    levels: list[int]
    slos: list[Slo] = Field(default_factory=list)
    margin: float = Field(default=0.05, ge=0, lt=1)

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        problem = levels_problem(v)  # a plan.json is held to what --concurrency accepts
        if problem is not None:
            raise ValueError(problem)
        return v


class SloCheck(BaseModel):
    key: str
    limit_s: float
    value_s: float | None  # None: not measured at this level
    holds: bool | None  # None: not measured, which does not hold


class LevelResult(BaseModel):
    level: int
    run_id: str
    episodes: int
    failed: int
    peak_in_flight: int | None  # episodes observed running at once (from their start and finish times)
    samples: int  # episodes with a headline score
    score: float | None
    score_low: float | None
    score_high: float | None
    paired: int  # episodes scored at both this level and level 1
    diff: float | None  # mean paired difference (this level - level 1)
    diff_low: float | None
    diff_high: float | None
    flips_to_correct: int
    flips_to_wrong: int
    replies_changed: int | None = None  # paired episodes whose reply texts differ from level 1's (numerics)
    non_inferior: bool | None  # None: fewer than two paired episodes, so not measured
    ttft_s: dict[str, float | None]  # p50 / p95 / p99 over generations
    e2e_s: dict[str, float | None]
    wall_s: float | None  # first episode start to last episode end
    completion_tokens: int | None
    tokens_per_s: float | None
    goodput_per_s: float | None  # episodes per second whose every request met every SLO threshold
    goodput_share: float | None
    goodput_note: str | None = None  # why goodput was not measured
    slos: list[SloCheck] = Field(default_factory=list)
    passes: bool = False
    why_not: list[str] = Field(default_factory=list)


class LoadVerdict(BaseModel):
    level: int | None  # None: no level passes
    reason: str


class LoadReport(BaseModel):
    format_version: int = LOAD_FORMAT
    model: str
    benchmark: str | None
    levels: list[int]
    slos: list[Slo]
    margin: float
    results: list[LevelResult]
    verdict: LoadVerdict


@dataclass
class LevelOutputs:
    """A level's per-episode headline scores and reply texts, which the other levels are paired with."""

    scores: dict[tuple[str, int], float]
    texts: dict[tuple[str, int], list[str]]


# -- measuring a level -------------------------------------------------------------------------------------------
