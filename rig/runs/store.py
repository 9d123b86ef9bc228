"""runs/<id>/results.sqlite: one row per finished (episode, repeat), written in one transaction.

A crash loses at most the episodes in flight; ``done_keys`` is what ``--resume`` skips. The schema and its version
live in rig.runformat.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from rig.records import EpisodeResult
from rig.runformat import connect_results, select_results
from rig.telemetry.gpu import GpuSample


class DuplicateResult(RuntimeError):
    pass


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.conn = connect_results(self.path)

    def done_keys(self) -> set[tuple[str, str, int]]:
        rows = self.conn.execute("SELECT benchmark, episode_id, repeat FROM results").fetchall()
        return {(b, e, int(r)) for b, e, r in rows}

    def write(self, res: EpisodeResult) -> None:
        record = res.model_dump_json()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO results VALUES (?,?,?,?,?,?,?,?)",
                (res.benchmark, res.episode_id, res.repeat, res.status, res.error_category,
                 json.dumps(res.scores), record, res.finished_at),
            )
            self.conn.executemany(
                "INSERT INTO generations VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (res.benchmark, res.episode_id, res.repeat, i, g.prompt_tokens, g.completion_tokens,
                     g.timings.ttft_s, g.timings.e2e_s, g.timings.decode_tps, g.parse_status, g.error)
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
