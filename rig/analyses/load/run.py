"""Running a load test: one `rig bench --spec` process per level, resumable through load-plan.json."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from rig.analyses.load.records import LoadSettings
from rig.analyses.load.slo import LOAD_FORMAT
from rig.execution.bench import BenchError, BenchOptions
from rig.inputs import InputError, read_json, validate_record
from rig.interrupt import Stopped, run_child
from rig.names import name_error, printable
from rig.paths import RUNS
from rig.records import OutputError, claim_folder, write_record
from rig.runfolder.folder import run_finished
from rig.runfolder.spec import FLAGS, RunSpec, spec_error


def engine_max_concurrency(o: BenchOptions) -> tuple[str, int] | None:
    """The model's engine and how many requests it serves at once, from its settings (no model is loaded); None
    when this process cannot tell (the engine's package lives in another interpreter, e.g. vLLM's venv)."""
    from rig.engines import MissingExtra, engine_class
    from rig.registry import RegistryError, load_registry

    assert o.model is not None
    try:
        spec = load_registry(o.models_file).get(o.model)
        eng = engine_class(spec.engine)(spec, "", gpu=None)
    except (RegistryError, MissingExtra, ImportError):
        return None  # the child names a registry problem with its own exit 2
    return spec.engine, eng.capabilities.max_concurrency


def _check(settings: LoadSettings) -> None:
    o = settings.bench
    if o.model is None:
        raise BenchError("--model is required (see `rig models`)")
    if o.benchmark is None:
        raise BenchError("rig load runs one benchmark: name it with --benchmark")
    for level in settings.levels:  # every level's run settings, before the first level runs
        try:
            RunSpec.model_validate({**o.spec_fields(), "concurrency": level})
        except ValidationError as e:
            raise BenchError(str(spec_error(e))) from None
    top = settings.levels[-1]
    cap = engine_max_concurrency(o)
    if cap is not None and cap[1] < top:
        raise BenchError(
            f"--concurrency {top}: model {o.model!r} (engine {cap[0]}) serves at most {cap[1]} request(s) at once; "
            "raise its engine_args (max_concurrency, max_num_seqs) or lower the levels"
        )


def level_argv(ldir: Path, level: int, o: BenchOptions, resume: str | None) -> list[str]:
    """The `rig bench --spec` process of one level: the load's run at that concurrency, its spec.json written under
    ``ldir/specs/level-N/``, its run folder in ``ldir/runs`` (``resume``: the level's run, when it has one)."""
    from rig.execution.launch import bench_argv

    spec = RunSpec.model_validate({**o.spec_fields(), "concurrency": level})
    return bench_argv(spec, ldir / "specs" / f"level-{level}", ldir / "runs", resume)


class LoadPlan(BaseModel):
    """`plan.json` in a load folder: the settings and each level's run id once its run folder exists, so
    `--resume` skips finished levels and resumes an unfinished one's run."""

    format_version: int = LOAD_FORMAT
    settings: LoadSettings
    runs: dict[int, str] = Field(default_factory=dict)  # level -> run id (a folder in the load folder's runs/)

    @model_validator(mode="after")
    def _runs_inside(self) -> LoadPlan:
        """A run id is one folder name under runs/ of a level the load has: resume and export stay in the folder."""
        for level, rid in self.runs.items():
            if level not in self.settings.levels:
                raise ValueError(f"runs: level {level} is not one of the load's levels {self.settings.levels}")
            problem = name_error(rid)
            if problem is not None:
                raise ValueError(f"runs.{level}: {printable(rid, 80)!r} {problem}; a run id is a folder name in runs/")
        return self


def _open_plan(out: Path, load_id: str) -> tuple[Path, LoadPlan]:
    ldir = out / load_id
    path = ldir / "plan.json"
    if not load_id or "/" in load_id or load_id in (".", ".."):
        raise BenchError(f"--resume {load_id!r}: give a load id (a folder name inside --out {out})")
    if not path.exists():
        raise BenchError(f"--resume {load_id}: {path}: cannot read (no such file; is it a load id in --out {out}?)")
    try:
        raw = read_json(path)  # bounded (rig.inputs): a FIFO, a huge or deeply nested plan is named, never waited on
        found = raw.get("format_version", 1) if isinstance(raw, dict) else 1
        if isinstance(found, int) and found > LOAD_FORMAT:
            raise BenchError(f"{path}: format {found} is newer than this rig reads ({LOAD_FORMAT})")
        plan = validate_record(path, raw, LoadPlan)
    except InputError as e:
        raise BenchError(f"--resume {load_id}: {e}") from None
    if plan.format_version > LOAD_FORMAT:
        raise BenchError(f"{path}: format {plan.format_version} is newer than this rig reads ({LOAD_FORMAT})")
    return ldir, plan


# The flags of `rig load` that are the load's own settings (the others are its run's, named by spec.FLAGS).
LOAD_FLAGS = {"levels": "--concurrency", "slos": "--slo", "margin": "--margin"}


def resume_changes(recorded: LoadSettings, given: dict[str, Any]) -> list[str]:
    """The flags in ``given`` (LoadSettings fields, and the run's BenchOptions fields, as validated) whose value
    differs from the load's recorded settings, each as ``--flag: recorded -> given``: `rig load --resume` refuses
    them, as `rig bench --resume` refuses a changed run setting, instead of going on with the recorded ones."""
    changed = []
    for key, value in given.items():
        if key == "options":
            for k, v in value.items():
                if recorded.bench.options.get(k) != v:
                    changed.append(f"-O {k}: {recorded.bench.options.get(k)!r} -> {v!r}")
            continue
        old = getattr(recorded, key) if key in LOAD_FLAGS else getattr(recorded.bench, key)
        if key == "data" and old is not None and value is not None:
            old, value = Path(old).resolve(), Path(value).resolve()
        if old != value:
            show = [",".join(s.key + f"={s.limit_s:g}s" for s in v) if key == "slos" else v for v in (old, value)]
            changed.append(
                f"{LOAD_FLAGS.get(key) or FLAGS.get(key, key)}: {printable(show[0], 80)} -> {printable(show[1], 80)}"
            )
    return changed


def run_load(
    settings: LoadSettings | None,
    say: Callable[[str], object] = print,
    *,
    resume: str | None = None,
    out: Path = RUNS,
    given: dict[str, Any] | None = None,
) -> tuple[Path, LoadSettings, list[Path]]:
    """Run every level, each in its own process, into a new load folder (or the load folder `resume` inside `out`,
    whose recorded settings are used: a setting ``given`` again must be the recorded one); return the folder, the
    settings and the levels' run folders. A stop (Ctrl-C, SIGTERM) waits for the level's process to stop, records
    its run so that `--resume` resumes it, and raises ``Stopped`` with the command that resumes."""
    if resume is not None:
        ldir, plan = _open_plan(out, resume)
        settings = plan.settings
        _check(settings)  # a plan is held to what a new load's flags are: the engine may serve fewer now
        changed = resume_changes(settings, given or {})
        if changed:
            raise BenchError(
                f"--resume {resume}: refusing, these settings differ from the load's ({ldir / 'plan.json'}): "
                + "; ".join(changed)
                + ". Drop them to resume it as recorded, or start a new load."
            )
    else:
        if settings is None:
            raise ValueError("settings or resume")
        _check(settings)
        o = settings.bench
        try:
            ldir = claim_folder(o.out, f"load-{time.strftime('%Y%m%d-%H%M%S')}-{o.benchmark}")
        except OutputError as e:
            raise BenchError(str(e)) from None
        o = o.seeded().model_copy(update={"resume": None})
        settings = settings.model_copy(update={"bench": o})
        plan = LoadPlan(settings=settings)
        write_record(ldir / "plan.json", plan)
    o = settings.bench
    runs = ldir / "runs"
    run_dirs: list[Path] = []
    for level in settings.levels:
        known = plan.runs.get(level)
        if known is not None and run_finished(runs / known):
            say(f"== concurrency {level}: finished before ({known})")
            run_dirs.append(runs / known)
            continue
        say(f"== concurrency {level} (own process)" + (f", resuming {known}" if known else ""))
        before = set(runs.glob("*")) if runs.exists() else set()
        returncode, stopped = run_child(level_argv(ldir, level, o, known))
        new = set(runs.glob("*")) - before if runs.exists() else set()
        if known is None and len(new) == 1:  # recorded even when stopped: --resume resumes this run, not a new one
            plan.runs[level] = new.pop().name
            write_record(ldir / "plan.json", plan)
        hint = f"rig load --resume {ldir.name} --out {ldir.parent}"
        if stopped:
            raise Stopped(f"level {level} stopped; finished levels are kept; resume with: {hint}")
        if returncode != 0 or level not in plan.runs:
            more = f"; resume with: {hint}" if level in plan.runs else ""
            raise BenchError(f"level {level}: rig bench failed (exit {returncode}); see its output above{more}")
        run_dirs.append(runs / plan.runs[level])
    return ldir, settings, run_dirs


# -- the report --------------------------------------------------------------------------------------------------
