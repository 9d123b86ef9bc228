"""runs/<id>/results.sqlite: one row per finished (episode, repeat), written in one transaction.

A crash loses at most the episodes in flight; ``done_keys`` is what ``--resume`` skips. The schema and its version
live in rig.runformat. A result that cannot be stored as it is (a model reply parsed into something JSON cannot
hold) is stored sanitized, with the reason in its ``error``, so one reply can never stop a run.
"""

from __future__ import annotations

import base64
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rig.records import EpisodeResult
from rig.runformat import connect_results, select_results
from rig.telemetry.gpu import GpuSample

MAX_DEPTH = 64  # deeper values are cut: pydantic's JSON reader refuses deep nesting, and no answer needs it


class DuplicateResult(RuntimeError):
    pass


def _clean_str(s: str) -> str:
    # Surrogate pairs written as two escapes become their character; a lone surrogate becomes U+FFFD.
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def sanitize(value: Any, reasons: set[str], depth: int = 0, seen: frozenset[int] = frozenset()) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, finite numbers, bool, None); each change adds a reason."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        reasons.add("non-finite number")
        return None
    if isinstance(value, str):
        clean = _clean_str(value)
        if clean != value:
            reasons.add("lone surrogate")
        return clean
    if isinstance(value, (bytes, bytearray)):
        reasons.add("bytes")
        return "base64:" + base64.b64encode(bytes(value)).decode()
    if depth >= MAX_DEPTH:
        reasons.add(f"nested deeper than {MAX_DEPTH}")
        return "<cut: nested too deep>"
    if id(value) in seen:
        reasons.add("self-reference")
        return "<cut: self-reference>"
    inner = seen | {id(value)}
    if isinstance(value, BaseModel):
        value = {k: getattr(value, k) for k in type(value).model_fields}
    if isinstance(value, dict):
        return {
            sanitize(str(k) if not isinstance(k, str) else k, reasons): sanitize(v, reasons, depth + 1, inner)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [sanitize(v, reasons, depth + 1, inner) for v in value]
    reasons.add(f"unserialisable {type(value).__name__}")
    return _clean_str(repr(value))[:200]


def storable(res: EpisodeResult) -> tuple[EpisodeResult, str]:
    """``res`` and its JSON record, made storable: the record must read back as it was written (reports read it)."""
    try:
        record = res.model_dump_json()
        record.encode("utf-8")
        EpisodeResult.model_validate_json(record)
        for v in (res.benchmark, res.episode_id, res.error_category, res.error, *(g.error for g in res.generations)):
            if v is not None:
                v.encode("utf-8")
        return res, record
    except Exception:
        pass
    reasons: set[str] = set()
    data = sanitize(res, reasons)
    reasons = reasons or {"unreadable record"}
    note = "stored with replacements (" + ", ".join(sorted(reasons)) + ")"
    data["error"] = f"{data['error']}\n{note}" if data.get("error") else note
    clean = EpisodeResult.model_validate(data)
    record = clean.model_dump_json()
    EpisodeResult.model_validate_json(record)
    return clean, record


class Store:
    """The writer of a run's results (``--resume`` reads its keys here too); readers use ``rig.runfolder.folder``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.conn = connect_results(self.path)

    def done_keys(self) -> set[tuple[str, str, int]]:
        rows = self.conn.execute("SELECT benchmark, episode_id, repeat FROM results").fetchall()
        return {(b, e, int(r)) for b, e, r in rows}

    def write(self, res: EpisodeResult) -> EpisodeResult:
        """Store one result in one transaction; returns what was stored (``res`` itself unless it was sanitized)."""
        res, record = storable(res)
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO results VALUES (?,?,?,?,?,?,?,?)",
                (
                    res.benchmark,
                    res.episode_id,
                    res.repeat,
                    res.status,
                    res.error_category,
                    json.dumps(res.scores),
                    record,
                    res.finished_at,
                ),
            )
            self.conn.executemany(
                "INSERT INTO generations VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        res.benchmark,
                        res.episode_id,
                        res.repeat,
                        i,
                        g.prompt_tokens,
                        g.completion_tokens,
                        g.timings.ttft_s,
                        g.timings.e2e_s,
                        g.timings.decode_tps,
                        g.parse_status,
                        g.error,
                    )
                    for i, g in enumerate(res.generations)
                ],
            )
            self.conn.execute("COMMIT")
        except sqlite3.IntegrityError:
            self.conn.execute("ROLLBACK")
            raise DuplicateResult(f"{res.benchmark}/{res.episode_id} repeat {res.repeat} is already stored") from None
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        return res

    def write_gpu_samples(self, samples: list[GpuSample]) -> None:
        if not samples:
            return
        with self.conn:
            self.conn.executemany("INSERT INTO gpu_samples VALUES (?,?)", [(s.t, s.used_bytes) for s in samples])

    def results(self, benchmark: str | None = None) -> list[EpisodeResult]:
        return select_results(self.conn, benchmark)

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        self.conn.close()
