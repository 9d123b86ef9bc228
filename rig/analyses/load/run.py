"""Running a load test: one `rig bench --spec` process per level, resumable through load-plan.json."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from rig.analyses.load.records import LoadSettings
from rig.analyses.load.slo import LOAD_FORMAT
from rig.execution.bench import BenchError, BenchOptions
from rig.records import write_record
from rig.runfolder.spec import RunSpec


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


def _open_plan(out: Path, load_id: str) -> tuple[Path, LoadPlan]:
    ldir = out / load_id
    path = ldir / "plan.json"
    if not load_id or "/" in load_id or load_id in (".", ".."):
        raise BenchError(f"--resume {load_id!r}: give a load id (a folder name inside --out {out})")
    try:
        plan = LoadPlan.model_validate_json(path.read_text())
    except OSError as e:
        raise BenchError(f"--resume {load_id}: {path}: cannot read ({e.strerror})") from None
    except ValidationError as e:
        err = e.errors()[0]
        raise BenchError(f"{path}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    if plan.format_version > LOAD_FORMAT:
        raise BenchError(f"{path}: format {plan.format_version} is newer than this rig reads ({LOAD_FORMAT})")
    return ldir, plan


def _finished(run_dir: Path) -> bool:
    from rig.runfolder.folder import RunFolder

    try:
        return RunFolder(run_dir).manifest.status == "finished"
    except Exception:  # a damaged or missing manifest: resume the run, whose own checks name the problem
        return False


def run_load(
    settings: LoadSettings | None,
    say: Callable[[str], object] = print,
    *,
    resume: str | None = None,
    out: Path = Path("runs"),
) -> tuple[Path, LoadSettings, list[Path]]:
    """Run every level, each in its own process, into a new load folder (or the load folder `resume` inside `out`,
    whose recorded settings are used); return the folder, the settings and the levels' run folders."""
    if resume is not None:
        ldir, plan = _open_plan(out, resume)
        settings = plan.settings
    else:
        if settings is None:
            raise ValueError("settings or resume")
        _check(settings)
        o = settings.bench
        ldir = o.out / f"load-{time.strftime('%Y%m%d-%H%M%S')}-{o.benchmark}"
        try:
            ldir.mkdir(parents=True, exist_ok=False)
        except OSError as e:
            raise BenchError(f"--out {o.out}: cannot create the load folder {ldir} ({e.strerror})") from None
        o = o.model_copy(update={"seed": o.seed if o.seed is not None else 0, "resume": None})
        settings = settings.model_copy(update={"bench": o})
        plan = LoadPlan(settings=settings)
        write_record(ldir / "plan.json", plan)
    o = settings.bench
    runs = ldir / "runs"
    run_dirs: list[Path] = []
    for level in settings.levels:
        known = plan.runs.get(level)
        if known is not None and _finished(runs / known):
            say(f"== concurrency {level}: finished before ({known})")
            run_dirs.append(runs / known)
            continue
        say(f"== concurrency {level} (own process)" + (f", resuming {known}" if known else ""))
        before = set(runs.glob("*")) if runs.exists() else set()
        r = subprocess.run(level_argv(ldir, level, o, known), stdout=None, stderr=None)
        new = set(runs.glob("*")) - before if runs.exists() else set()
        if known is None and len(new) == 1:
            plan.runs[level] = new.pop().name
            write_record(ldir / "plan.json", plan)
        if r.returncode != 0 or level not in plan.runs:
            hint = f"; resume with: rig load --resume {ldir.name} --out {ldir.parent}" if level in plan.runs else ""
            raise BenchError(f"level {level}: rig bench failed (exit {r.returncode}); see its output above{hint}")
        run_dirs.append(runs / plan.runs[level])
    return ldir, settings, run_dirs


# -- the report --------------------------------------------------------------------------------------------------
