"""Parsing `rig load`'s --slo and --concurrency flags."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from rig.execution.bench import BenchError
from rig.names import printable
from rig.runfolder.spec import MAX_CONCURRENCY

QUANTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0}
METRICS = ("ttft", "e2e")
LOAD_FORMAT = 1  # load.json's format; bump and read the old one when it changes
MAX_SLO_S = 86_400.0  # a latency objective past a day is a typo (`--slo e2e_p95=99999999m`)


class Slo(BaseModel):
    """A latency objective: the `quantile` of the per-request `metric` at most `limit_s` seconds."""

    metric: Literal["ttft", "e2e"]
    quantile: Literal["p50", "p95", "p99"]
    limit_s: float = Field(gt=0, le=MAX_SLO_S, allow_inf_nan=False)

    @property
    def key(self) -> str:
        return f"{self.metric}_{self.quantile}"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)?\s*$")


def parse_duration(text: str) -> float:
    """'2s', '500ms', '1.5m' or a bare number of seconds -> seconds; ValueError naming the text otherwise."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (e.g. 2s, 500ms, 1.5m)")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2) or "s"]


def parse_slos(text: str | None) -> list[Slo]:
    """`ttft_p95=2s,e2e_p95=30s` -> SLOs; a BenchError naming --slo and the item otherwise."""
    slos: list[Slo] = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        key, eq, value = item.partition("=")
        metric, _, q = key.strip().partition("_")
        if not eq or metric not in METRICS or q not in QUANTILES:
            keys = ", ".join(f"{m}_{p}" for m in METRICS for p in QUANTILES)
            raise BenchError(f"--slo {item!r}: expected KEY=DURATION with KEY one of {keys}")
        try:
            limit = parse_duration(value)
        except ValueError as e:
            raise BenchError(f"--slo {item!r}: {e}") from None
        if limit <= 0:
            raise BenchError(f"--slo {item!r}: the limit must be above 0")
        if not limit <= MAX_SLO_S:  # also an overflow to infinity
            raise BenchError(f"--slo {item!r}: the limit must be at most {MAX_SLO_S:g} s (a day)")
        slo = Slo(metric=metric, quantile=q, limit_s=limit)  # type: ignore[arg-type]
        if any(s.key == slo.key for s in slos):
            raise BenchError(f"--slo {item!r}: {slo.key} is given twice")
        slos.append(slo)
    return slos


def levels_problem(levels: list[int]) -> str | None:
    """Why ``levels`` cannot be a load's levels (ascending, distinct, from 1, at least two, each at most
    MAX_CONCURRENCY), else None: the one check of the flag and of a plan.json that `--resume` reads."""
    bad = next((n for n in levels if not 1 <= n <= MAX_CONCURRENCY), None)
    if bad is not None:
        return f"{printable(bad, 40)} is outside 1..{MAX_CONCURRENCY}"
    if len(set(levels)) != len(levels):
        return "a level is listed twice"
    if levels != sorted(levels):
        return "list the levels in ascending order"
    if not levels or levels[0] != 1:
        return "the first level must be 1, the reference the others are paired with"
    if len(levels) < 2:
        return "give at least two levels (1 and a higher one)"
    return None


def parse_levels(text: str) -> list[int]:
    """`1,2,4` -> ascending distinct levels that start at 1 (the reference); a BenchError naming the item."""
    levels: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        try:
            n = int(item)
        except ValueError:
            raise BenchError(f"--concurrency {text!r}: {item!r} is not a whole number") from None
        if n < 1:
            raise BenchError(f"--concurrency {text!r}: {n} is below 1")
        if n > MAX_CONCURRENCY:  # refused here, before any level runs, not when its process is started
            raise BenchError(f"--concurrency {text!r}: {printable(item, 40)} is above {MAX_CONCURRENCY}")
        levels.append(n)
    problem = levels_problem(levels)
    if problem is not None:
        raise BenchError(f"--concurrency {text!r}: {problem}")
    return levels
