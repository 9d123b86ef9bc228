"""`rig runs` and `rig export`: list run folders; per-episode rows joined with their telemetry."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rig.records import atomic_path
from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import Failure, benchmark_of, total
from rig.runformat import RunFileError

EXPORT_FORMATS = ("csv", "jsonl", "parquet")


class RunRow(BaseModel):
    run_id: str
    model: str
    benchmarks: str
    status: str
    done: int
    total: int
    started: str


def list_runs(root: Path) -> list[RunRow]:
    rows = []
    for d in sorted(root.glob("*/manifest.json")):
        try:
            folder = RunFolder(d.parent)
        except (ValueError, OSError):
            continue  # not a run folder (e.g. a compare folder) or an unreadable manifest
        man = folder.manifest
        try:
            done = folder.count()
        except RunFileError:
            done = 0  # no results stored yet, or a damaged file that `rig report` names
        total = folder.planned
        status = man.status if not (man.status == "running" and done < total) else "running or crashed"
        rows.append(
            RunRow(
                run_id=man.run_id,
                model=man.config.model.name,
                benchmarks=",".join(b.name for b in man.config.benchmarks),
                status=status,
                done=done,
                total=total,
                started=time.strftime("%Y-%m-%d %H:%M", time.localtime(man.started_at)),
            )
        )
    return rows


def episode_rows(run_dir: Path) -> list[dict[str, Any]]:
    """One flat row per (episode, repeat): scores, status, summed tokens, first/last timings."""
    folder = RunFolder(run_dir)
    man, results = folder.manifest, folder.results()
    failed: dict[tuple[str, str, int], Failure] = {}
    for b in folder.benchmarks:
        taxonomy = folder.summary(b.name).failures
        failed.update({(b.name, f.episode_id, f.repeat): f for f in (taxonomy.failures if taxonomy else [])})
    success = {b.name: benchmark_of(b).success for b in folder.benchmarks}
    rows = []
    for r in results:
        g = r.generations
        why = failed.get((r.benchmark, r.episode_id, r.repeat))
        row: dict[str, Any] = {
            "run_id": man.run_id,
            "model": man.config.model.name,
            "quantization": man.config.model.quantization,
            "benchmark": r.benchmark,
            "episode_id": r.episode_id,
            "repeat": r.repeat,
            "seed": r.seed,  # None: stored before rig recorded each repeat's seed (pass^k not measured)
            "success": success[r.benchmark](r) if r.benchmark in success else None,  # pass^k's trial (None: unscored)
            "failure_class": why.primary if why else None,  # the shared taxonomy's primary class
            "failure_detail": why.detail if why else None,  # the benchmark's own reason
            "status": r.status,
            "error_category": r.error_category,
            "error": (r.error or "")[:500] or None,
            "generations": len(g),
            "prompt_tokens": total(x.prompt_tokens for x in g),
            "completion_tokens": total(x.completion_tokens for x in g),
            "ttft_s": g[0].timings.ttft_s if g else None,
            "e2e_s": total(x.timings.e2e_s for x in g),
            "decode_tps": g[-1].timings.decode_tps if g else None,
            "output": g[-1].text if g else None,
            # None with the reason beside it when not measured (older runs: "recorded before ...")
            "energy_j": r.energy.joules if r.energy else None,
            "energy_not_measured": (r.energy.reason if r.energy else "recorded before rig measured energy")
            if r.energy is None or r.energy.joules is None
            else None,
            "energy_attribution": r.energy.attribution if r.energy else None,
        }
        row.update({f"tag_{k}": v for k, v in r.tags.items()})
        row.update({f"score_{k}": v for k, v in r.scores.items()})
        rows.append(row)
    return rows


def export(run_dir: Path, fmt: str, out: Path | None = None) -> Path:
    """Write the run's episode rows to ``out``; the file appears under its name only once complete (``atomic_path``),
    so an export stopped by a signal or a full disk never leaves a short file that looks valid."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: choose csv, jsonl or parquet")
    rows = episode_rows(run_dir)
    out = out or run_dir / f"episodes.{fmt}"
    write_rows(rows, list(dict.fromkeys(k for r in rows for k in r)), fmt, out)
    return out


def write_rows(rows: list[dict[str, Any]], columns: Sequence[str], fmt: str, out: Path) -> None:
    """Rows to csv (these columns, in this order), jsonl or parquet, written whole through ``atomic_path``."""
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RuntimeError("parquet export needs pyarrow: pip install 'rig[export]'") from None
    with atomic_path(out) as tmp:
        if fmt == "jsonl":
            with tmp.open("w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
        elif fmt == "csv":
            with tmp.open("w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=list(columns))
                w.writeheader()
                w.writerows(rows)
        else:
            pq.write_table(pa.Table.from_pylist(rows), tmp)
