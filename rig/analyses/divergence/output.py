"""Writing and reading a divergence report: the CSV files, divergence.json, and the markdown section."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rig.analyses.divergence.records import CSV_COLUMNS, DIVERGENCE_FORMAT, EPISODE_COLUMNS, DivergenceReport
from rig.records import (
    write_record,
)
from rig.render.export import EXPORT_FORMATS, write_rows


def _csv(rows: list[BaseModel], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        d = r.model_dump()
        w.writerow(["" if d[c] is None else d[c] for c in columns])  # empty = not measured, never 0
    return buf.getvalue()


def write_report(report: DivergenceReport, out: Path) -> list[Path]:
    """divergence.csv, divergence_episodes.csv and divergence.json, each written whole (temporary file, rename)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "divergence.csv": _csv(list(report.classes), CSV_COLUMNS),
        "divergence_episodes.csv": _csv(list(report.episode_rows), EPISODE_COLUMNS),
    }
    tmps = []
    for name, text in files.items():
        tmp = out / (name + ".tmp")
        tmp.write_text(text)
        tmps.append((tmp, out / name))
    write_record(out / "divergence.json", report)
    for tmp, dst in tmps:
        os.replace(tmp, dst)
    return [dst for _, dst in tmps] + [out / "divergence.json"]


def read_report(out: Path) -> DivergenceReport:
    """A comparison folder's divergence.json; ValueError naming the file (and the field), NewerFormatError from a
    newer rig."""
    from rig.inputs import read_json, validate_record
    from rig.runformat import check_version

    path = out / "divergence.json"
    head = read_json(path, max_bytes=MAX_REPORT_BYTES)  # InputError (a ValueError) naming the file
    found = head.get("format_version", 1) if isinstance(head, dict) else 1
    if isinstance(found, int):  # anything else is left to validation to refuse
        check_version(path, found, DIVERGENCE_FORMAT)
    return validate_record(path, head, DivergenceReport)


# A divergence.json holds a row per variant and token class: far below this on any comparison rig runs.
MAX_REPORT_BYTES = 256 << 20


def _f(x: float | None, digits: int = 4) -> str:
    return "not measured" if x is None else f"{x:.{digits}f}"


def _delta(x: float | None) -> str:
    """A score change, never printed as a signed zero: a change under half the last shown digit keeps its exponent."""
    if x is None:
        return "not measured"
    return f"{x:+.3f}" if abs(x) >= 0.0005 else f"{x:+.1e}"


def divergence_md(report: DivergenceReport) -> str:
    """The compare.md section: KLD per token class and variant, flipped episodes lined up, the worst tokens."""
    lines = [
        f"## Token-level divergence against {report.reference}",
        "",
        f"Each variant teacher-forced on the {report.pairs} replies of {report.episodes} reference episodes "
        f"(reference on {report.engine}; KL divergence reference -> variant in nats; 95% CI by resampling "
        "episodes; top-1 = the variants' most likely tokens agree).",
    ]
    if any(r.bound == "lower" for r in report.classes):
        lines += [
            "",
            "Rows with bound `lower (top-k)` are **approximate**: one side (vLLM `prompt_logprobs`) gives only its k "
            "most likely tokens, so the KL divergence is taken over the tokens known on both sides plus one bucket "
            "holding all others. Merging tokens never increases a KL divergence, so these values are lower bounds on "
            "the full-vocabulary KLD (means, CIs and p99 alike); top-1 agreement and the log-probs are exact. "
            "`engine divergence` rows compare two engines, not two quantizations.",
        ]
    lines += [
        "",
        "| Variant | Kind | Token class | Tokens | Mean KLD | CI low | CI high | Top-1 agreement | p99 KLD | Bound |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report.classes:
        if r.tokens == 0 and r.token_class != "all":
            continue
        bound = "exact" if r.bound == "exact" else f"lower (top-{r.top_k})"
        lines.append(
            f"| {r.variant} | {r.kind} | {r.token_class} | {r.tokens} | {_f(r.mean_kld)} | {_f(r.kld_ci_low)} | "
            f"{_f(r.kld_ci_high)} | {_f(r.top1_agreement, 3)} | {_f(r.p99_kld)} | {bound} |"
        )
    flips = [e for e in report.episode_rows if e.score_delta not in (None, 0.0) and e.token_class != "all"]
    if flips:
        lines += ["", "Episodes whose score changed, by token class of the divergence:", ""]
        lines += ["| Variant | Episode | Score delta | Token class | Tokens | Mean KLD | Top-1 agreement |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for e in sorted(flips, key=lambda e: (e.variant, e.episode_id, e.repeat, -e.mean_kld)):
            lines.append(
                f"| {e.variant} | {e.episode_id}#{e.repeat} | {_delta(e.score_delta)} | {e.token_class} | {e.tokens} | "
                f"{e.mean_kld:.4f} | {e.top1_agreement:.3f} |"
            )
    if report.worst:
        lines += ["", "Worst tokens:", "", "| Variant | Episode | Class | KLD | log p ref | log p variant | Context |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for w in report.worst:
            ctx = w.context.replace("|", "\\|").replace("\n", "\\n")
            lines.append(
                f"| {w.variant} | {w.episode_id}#{w.repeat} | {w.token_class} | {w.kld:.3f} | "
                f"{w.logprob_reference:.3f} | {w.logprob_variant:.3f} | `{ctx}` |"
            )
    notes = []
    if report.skipped:
        notes.append(f"{len(report.skipped)} episode(s) or calls left out (see divergence.json `skipped`)")
    if report.request_mismatches:
        notes.append(
            f"{len(report.request_mismatches)} replayed request(s) differ from the stored request hash "
            "(the benchmark's prompts changed since the run)"
        )
    if notes:
        lines += ["", "_" + "; ".join(notes) + "._"]
    return "\n".join(lines) + "\n"


DIVERGENCE_TABLES = ("classes", "episodes")


def divergence_rows(cdir: Path, table: str) -> list[dict[str, Any]]:
    """A comparison folder's divergence rows (``divergence.json``): per variant and token class (``classes``, the
    rows of divergence.csv) or per episode (``episodes``, those of divergence_episodes.csv), same columns."""
    if table not in DIVERGENCE_TABLES:
        raise ValueError(f"--divergence {table!r}: choose classes or episodes")
    if not (cdir / "divergence.json").is_file():
        raise ValueError(f"{cdir}: no divergence.json (made by `rig compare ... --divergence`)")
    report = read_report(cdir)
    rows, cols = (report.classes, CSV_COLUMNS) if table == "classes" else (report.episode_rows, EPISODE_COLUMNS)
    return [{c: d[c] for c in cols} for d in (r.model_dump() for r in rows)]


def export_divergence(cdir: Path, table: str, fmt: str, out: Path | None = None) -> Path:
    """``rig export CDIR --divergence classes|episodes``: the rows to csv, jsonl or parquet, written whole; by
    default ``divergence-<table>.<fmt>`` in the comparison folder (the pass's own csv files stay as they are)."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: choose csv, jsonl or parquet")
    rows = divergence_rows(cdir, table)
    out = out or cdir / f"divergence-{table}.{fmt}"
    write_rows(rows, CSV_COLUMNS if table == "classes" else EPISODE_COLUMNS, fmt, out)
    return out
