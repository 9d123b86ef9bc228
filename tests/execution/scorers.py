"""Plugin scorers for tests/execution/test_rescore.py (installed through tests/execution/plugins/): one that reads a
file of its own for a built-in benchmark, one that raises, one whose benchmark is not installed."""

from __future__ import annotations

import json
from pathlib import Path

from rig.benchmarks.base import Benchmark
from rig.benchmarks.predictions import PredictionError, Scorer, external_generation
from rig.records import EpisodeResult


class RouteFile(Scorer):
    """A lab's own format: {"model": name, "answers": {episode id: text}}, scored 1 when the text is "ok"."""

    name = "routefile"
    benchmark = "routeeval"
    predictions = "a test's own JSON file"

    def read(self, bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
        ids = {e.id for e in bench.episodes()}
        out, models = [], set()
        for repeat, f in enumerate(files):
            doc = json.loads(f.read_text())
            models.add(doc["model"])
            for eid, text in doc["answers"].items():
                if eid not in ids:
                    raise PredictionError(f"{f}, field answers: {eid!r} is not an episode of {bench.data}")
                out.append(
                    EpisodeResult(
                        benchmark=bench.name,
                        episode_id=eid,
                        repeat=repeat,
                        generations=[external_generation(text)],
                        scores={"accuracy": 1.0 if text == "ok" else 0.0},
                    )
                )
        return out, models


class Crash(RouteFile):
    name = "crashscorer"

    def read(self, bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
        raise RuntimeError("this plugin's reader broke")


class Orphan(RouteFile):
    name = "orphan"
    benchmark = "no-such-benchmark"
