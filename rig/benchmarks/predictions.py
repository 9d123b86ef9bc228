"""Scorers of predictions made outside rig (`rig rescore`): the `Scorer` class each one is, registered in the one
registry (`rig.plugins`, group ``rig.scorers``) apart from the benchmark whose data and metrics it scores with, and
what they share: their error, the file reader and the generation stored for an answer made outside rig.

A scorer reads a reference harness's own per-case files, aligns each prediction with an episode of the benchmark's
data and scores it with the benchmark's own scoring functions, both metric modes stored as a run stores them. The
benchmark knows nothing of it: the scorer imports the benchmark, never the other way round."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rig.benchmarks.base import DataError, UnreadableJson, read_json
from rig.records import Generation

if TYPE_CHECKING:
    from rig.benchmarks.base import Benchmark
    from rig.records import EpisodeResult


class Scorer(ABC):
    """Reads one harness's prediction files into scored results of one benchmark."""

    name: ClassVar[str] = ""  # its registry entry's name (rig's own: their benchmark's)
    benchmark: ClassVar[str] = ""  # the benchmark whose data it aligns with and whose metrics it scores
    predictions: ClassVar[str] = ""  # the files it reads, for messages

    @classmethod
    def options(cls, bench: type[Benchmark], options: dict[str, Any], mode: str) -> dict[str, Any]:
        """The benchmark options a rescore in metric ``mode`` runs with (the benchmark's ``mode`` option when it has
        one); a DataError names the option that cannot be."""
        return {**options, "mode": mode} if "mode" in bench.Options.model_fields else options

    @abstractmethod
    def read(self, bench: Benchmark, files: list[Path], mode: str) -> tuple[list[EpisodeResult], set[str]]:
        """The files as scored results, both metric modes stored with ``mode``'s keys plain, and the model names
        they carry; bad input is a `PredictionError` naming file, record and field."""


class PredictionError(DataError):
    """Bad input in a prediction file; str() names the file, the record and the field."""


def load_predictions(path: Path) -> Any:
    """A prediction file: the benchmarks' own JSON reader, its errors worded as rescore's ("not readable JSON")."""
    try:
        return read_json(path)
    except UnreadableJson as e:
        raise PredictionError(f"{path}: not readable JSON ({e.detail})") from None
    except DataError as e:  # missing, a folder, unreadable, or nested past what any record needs
        raise PredictionError(str(e)) from None


def external_generation(text: str, parse_ok: bool | None = None) -> Generation:
    """An answer made outside rig: its text (and whether it parsed), no request, timings or token counts."""
    if parse_ok is None:
        return Generation(request_hash="external", text=text)
    return Generation(request_hash="external", text=text, parse_status="ok" if parse_ok else "parse_error")


def short(value: Any) -> str:
    """A value quoted in an error message, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
