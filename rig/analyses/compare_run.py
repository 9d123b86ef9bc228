"""`rig compare`'s variants as runs: the comparison folder's plan (`plan.json`: each variant's run spec and run),
each variant in its own `rig bench` process, and `--resume` of a stopped comparison."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator

from rig.analyses.compare import Variant, cell_spec, claim_compare_folder, parse_variant
from rig.execution.bench import BenchError, BenchOptions
from rig.execution.launch import bench_argv
from rig.inputs import InputError, read_json, validate_record
from rig.interrupt import Stopped, run_child
from rig.names import name_error, printable
from rig.records import write_record
from rig.runfolder.folder import run_finished
from rig.runfolder.spec import RunSpec
from rig.runformat import NewerFormatError, check_version

COMPARE_FORMAT = 1
PLAN_FILE = "plan.json"  # a comparison folder's plan, when `rig compare` ran its variants


MAX_LABEL = 200  # characters of a variant's label: it names a folder under specs/ and a column of compare.md


class CompareCell(BaseModel):
    """One variant of a comparison: its label, its run's spec, and its run (a folder in runs/) once that exists."""

    label: str = Field(min_length=1, max_length=MAX_LABEL)
    spec: RunSpec
    run: str | None = None

    @field_validator("run")
    @classmethod
    def _run_in_runs(cls, v: str | None) -> str | None:
        if v is not None and (why := name_error(v)) is not None:  # ../../x or an absolute path: outside runs/
            raise ValueError(f"{printable(v, 80)!r} {why}; a run is a folder name in the comparison's runs/")
        return v


class DivergenceAsk(BaseModel):
    """`rig compare --divergence`'s flags, kept for `--resume` (the pass itself reruns whole: it scores every
    variant in one pass over the reference's pairs and keeps no per-variant result)."""

    reference: str | None = None
    top_k: int
    models_file: str | None = None


class ComparePlan(BaseModel):
    """`plan.json` in a comparison folder of variants: each variant's run spec, and its run once the folder exists,
    so `rig compare --resume` keeps finished runs, resumes a stopped one and runs the rest; then the divergence pass
    when it was asked."""

    format_version: int = COMPARE_FORMAT
    cells: list[CompareCell] = Field(min_length=2)  # what the command line asks: two variants at least
    divergence: DivergenceAsk | None = None

    @model_validator(mode="after")
    def _distinct(self) -> ComparePlan:
        labels = [c.label for c in self.cells]
        runs = [c.run for c in self.cells if c.run is not None]
        if len(set(labels)) != len(labels):
            raise ValueError("cells: two variants have the same label")
        if len(set(runs)) != len(runs):  # one run compared with itself
            raise ValueError("cells: two variants name the same run")
        return self


def run_compare(
    variants: list[Variant | str],
    opts: BenchOptions,
    say: Callable[[str], object] = print,
    divergence: DivergenceAsk | None = None,
) -> tuple[Path, list[Path]]:
    """Run each variant in its own `rig bench` process into a new comparison folder; the folder and the runs. A stop
    (Ctrl-C, SIGTERM) stops the variant's process, records its run, and raises ``Stopped`` with the command that
    resumes (``resume_compare``)."""
    vs = [v if isinstance(v, Variant) else parse_variant(v) for v in variants]
    if len(vs) < 2:
        raise BenchError("rig compare needs at least two variants (models, or one model with --decode none,json)")
    if opts.benchmark is None:
        raise BenchError("rig compare runs one benchmark: name it with --benchmark")
    cells = [CompareCell(label=v.label, spec=cell_spec(v, opts)) for v in vs]
    cdir = claim_compare_folder(opts.out, f"compare-{time.strftime('%Y%m%d-%H%M%S')}-{opts.benchmark}")
    plan = ComparePlan(cells=cells, divergence=divergence)
    write_record(cdir / PLAN_FILE, plan)
    return cdir, _run_cells(cdir, plan, say)


def resume_hint(cdir: Path) -> str:
    return f"rig compare --resume {cdir.name} --out {cdir.parent}"


def resume_compare(
    compare_id: str, out: Path, say: Callable[[str], object] = print
) -> tuple[Path, list[Path], ComparePlan]:
    """Go on with the comparison ``compare_id`` (a folder in ``out``) as its plan.json records it: finished runs are
    kept, a stopped one resumes, the rest run; the folder, the runs and the plan (its divergence ask)."""
    cdir = out / compare_id
    path = cdir / PLAN_FILE
    if not compare_id or name_error(compare_id):
        raise BenchError(f"--resume {compare_id!r}: give a comparison id (a folder name inside --out {out})")
    if not path.exists():
        raise BenchError(
            f"--resume {compare_id}: {path}: no such file (is it a comparison of variants in --out {out}?)"
        )
    try:
        plan = read_plan(cdir)
    except (InputError, NewerFormatError) as e:
        raise BenchError(f"--resume {compare_id}: {e}") from None
    return cdir, _run_cells(cdir, plan, say), plan


def read_plan(cdir: Path) -> ComparePlan:
    """A comparison folder's plan.json, bounded and strict: InputError or NewerFormatError naming file and field."""
    path = cdir / PLAN_FILE
    raw = read_json(path)  # bounded: a FIFO, a huge or deeply nested plan is named, never waited on
    found = raw.get("format_version", 1) if isinstance(raw, dict) else 1
    if isinstance(found, int):
        check_version(path, found, COMPARE_FORMAT)
    return validate_record(path, raw, ComparePlan)


def _run_cells(cdir: Path, plan: ComparePlan, say: Callable[[str], object]) -> list[Path]:
    """Each variant's run, kept when it finished before; a stop anywhere here is a ``Stopped`` naming the resume."""
    try:
        return [_run_cell(cdir, plan, i, say) for i in range(len(plan.cells))]
    except Stopped:
        raise
    except KeyboardInterrupt:  # between two variants' processes
        raise Stopped(f"stopped; finished variants are kept; resume with: {resume_hint(cdir)}") from None


def _run_cell(cdir: Path, plan: ComparePlan, i: int, say: Callable[[str], object]) -> Path:
    cell, runs = plan.cells[i], cdir / "runs"
    if cell.run is not None and run_finished(runs / cell.run):
        say(f"== {cell.label}: finished before ({cell.run})")
        return runs / cell.run
    say(f"== {cell.label} (own process)" + (f", resuming {cell.run}" if cell.run else ""))
    before = set(runs.glob("*")) if runs.exists() else set()
    argv = bench_argv(cell.spec, cdir / "specs" / f"{i}-{_file_name(cell.label)}", runs, cell.run)
    returncode, stopped = run_child(argv)
    new = set(runs.glob("*")) - before if runs.exists() else set()
    if cell.run is None and len(new) == 1:  # recorded even when stopped: --resume resumes this run
        cell.run = new.pop().name
        write_record(cdir / PLAN_FILE, plan)
    if stopped:
        raise Stopped(f"{cell.label} stopped; finished variants are kept; resume with: {resume_hint(cdir)}")
    if returncode != 0 or cell.run is None:
        more = f"; resume with: {resume_hint(cdir)}" if cell.run else ""
        raise BenchError(f"rig bench for {cell.label} failed (exit {returncode}); see its output above{more}")
    return runs / cell.run


def _file_name(label: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
