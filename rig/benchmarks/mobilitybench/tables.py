"""MobilityBench aggregation: per-metric means over the episodes where a metric is defined, and the reference
pipeline's own aggregate (reproduced exactly for its results)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from rig.benchmarks.mobilitybench.scoring import METRICS


def mean_of(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def aggregate(rows: list[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Per metric, the mean over the episodes where it is defined (None if none)."""
    return {m: mean_of(r.get(m) for r in rows) for m in METRICS}


class RefResult(BaseModel):
    """One result of the reference pipeline's metric (for reproducing its aggregation exactly)."""

    score: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


def aggregate_reference(results: list[RefResult]) -> dict[str, Any]:
    """The reference aggregate: per numeric detail field, the mean over successful results that have it (bool as
    0/1), rounded to 4 places; average_score is the mean of the (mostly dummy) scores."""
    ok = [r for r in results if r.error is None]
    fields: dict[str, list[float]] = {}
    for r in ok:
        for k, v in r.details.items():
            if isinstance(v, (bool, int, float)) and not (isinstance(v, float) and math.isnan(v)):
                fields.setdefault(k, []).append(float(v))
    return {
        "sub_scores": {k: round(sum(v) / len(v), 4) for k, v in fields.items()},
        "average_score": round(sum(r.score for r in ok) / len(ok), 4) if ok else 0.0,
        "total": len(results),
        "successful": len(ok),
    }
