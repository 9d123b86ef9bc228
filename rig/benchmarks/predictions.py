"""What a benchmark's reader of a reference harness's prediction files (`rig rescore`) shares: its error, the file
reader and the generation it stores for an answer made outside rig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rig.benchmarks.base import DataError, UnreadableJson, read_json
from rig.records import Generation


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
