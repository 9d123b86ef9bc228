"""Run a sweep's cells: each shard of each cell is one `rig bench` process in its own folder.

The driver keeps the queue and the retry count; an attempt (one process) runs either in a local thread or as a Ray
task with the cell's resources. Whatever dies (the process, the Ray worker, the node), the next attempt resumes from
the run's own store, so a retried cell neither loses nor repeats an episode. The run's manifest status, not the exit
code, says whether a cell finished: `rig bench` stopped by SIGTERM records "interrupted" and exits 0.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig.execution.bench import BenchError, RunLock
from rig.execution.launch import bench_argv
from rig.records import read_record, write_record
from rig.runfolder.folder import RunFolder
from rig.runfolder.spec import default_tool_mode
from rig.sweep.spec import Cell, SweepSpec

STATE = "job.json"
LOCK_WAIT_S = 120.0  # how long a retry waits for the previous attempt's process to let go of the run


class JobState(BaseModel):
    """One shard of one cell, as the live table and a re-run see it (written to its folder as job.json)."""

    cell: str
    shard: int = 0
    shards: int = 1
    status: Literal["pending", "running", "done", "failed"] = "pending"
    attempts: int = 0
    resumed: int = 0  # attempts that resumed a partial run
    node: str | None = None
    pid: int | None = None
    run_id: str | None = None
    wall_s: float | None = None  # the last attempt, as the driver saw it: submit to result
    process_s: float | None = None  # the last attempt's `rig bench` process alone (wall_s - process_s: scheduling)
    errors: list[str] = Field(default_factory=list)

    @property
    def name(self) -> str:
        return self.cell if self.shards == 1 else f"{self.cell} [{self.shard + 1}/{self.shards}]"


class Attempt(BaseModel):
    returncode: int
    finished: bool
    run_id: str | None
    node: str
    process_s: float | None = None
    error: str | None = None


def job_dir(out: Path, cell: Cell, shard: int, shards: int) -> Path:
    d = out / "cells" / cell.key
    return d if shards == 1 else d / f"shard-{shard}-of-{shards}"


def run_folder(jdir: Path) -> Path | None:
    """The one run folder `rig bench` made inside a job folder (None before its manifest exists)."""
    found = [p.parent for p in jdir.glob("*/manifest.json") if p.parent.name != "merged"]
    return found[0] if len(found) == 1 else None


def finished(jdir: Path) -> bool:
    run = run_folder(jdir)
    return run is not None and RunFolder(run).manifest.status == "finished"


def episode_counts(jdir: Path) -> tuple[int, int | None]:
    """(stored episodes, planned episodes x repeats) of a job, read without disturbing a running writer."""
    run = run_folder(jdir)
    if run is None:
        return 0, None
    try:
        folder = RunFolder(run)
    except (OSError, ValueError):
        return 0, None
    try:
        done = folder.count()
    except (OSError, ValueError):  # no results stored yet (or a file `rig report` will name)
        done = 0
    return done, folder.planned


def wait_for_run(run: Path, timeout: float = LOCK_WAIT_S) -> None:
    """Wait until no process holds the run's lock. A dead worker's cell process can outlive it for a while (Ray sends
    it SIGTERM and `rig bench` finishes its engine call before it exits): a retry started at once would find the run
    locked and fail as bad input. After `timeout` the retry goes ahead and `rig bench` names the holder."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            RunLock(run).release()
            return
        except BenchError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)


def _read_state(jdir: Path) -> JobState | None:
    p = jdir / STATE
    return read_record(p, JobState) if p.exists() else None


def _write_state(jdir: Path, st: JobState) -> None:
    write_record(jdir / STATE, st)


def attempt(
    cell: Cell,
    jdir: Path,
    shard: int,
    shards: int,
    num_gpus: float,
    devices: list[str] | None = None,
    cwd: str | None = None,
) -> Attempt:
    """One `rig bench` process for one shard of a cell, resuming the run already in `jdir` if there is one.
    `devices`: the GPUs the local scheduler gave this cell (Ray sets CUDA_VISIBLE_DEVICES for its tasks itself)."""
    jdir.mkdir(parents=True, exist_ok=True)
    node = socket.gethostname()
    prev = run_folder(jdir)
    if prev is not None:
        wait_for_run(prev)
    # Ray (or the local scheduler) has narrowed CUDA_VISIBLE_DEVICES to this cell's GPUs: the first is ordinal 0.
    spec = cell.spec(shard=f"{shard}/{shards}" if shards > 1 else None, gpu=0 if num_gpus > 0 else None)
    argv = bench_argv(spec, jdir, jdir, resume=prev.name if prev else None)
    st = _read_state(jdir) or JobState(cell=cell.key, shard=shard, shards=shards)
    with open(jdir / "bench.log", "ab") as log:
        env = os.environ.copy()
        if devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        # the driver's folder where it exists here, so a worker runs the same rig checkout as the driver
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd if cwd and Path(cwd).is_dir() else None
        )
        st.status, st.node, st.pid = "running", node, proc.pid
        st.resumed += prev is not None
        _write_state(jdir, st)
        rc = proc.wait()
        process_s = time.perf_counter() - t0
    run = run_folder(jdir)
    done = run is not None and RunFolder(run).manifest.status == "finished"
    err = None
    if not done:
        tail = (jdir / "bench.log").read_text(errors="replace").strip().splitlines()[-3:]
        why = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}" if rc else "run not finished"
        err = why + (": " + " | ".join(tail) if tail else "")
    return Attempt(
        returncode=rc, finished=done, run_id=run.name if run else None, node=node, process_s=process_s, error=err
    )


# ---- Ray: the same attempt as a task, with the cell's resources ------------------------------------------------


def _pack(d: Path) -> bytes | None:
    if not d.exists():
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(d, arcname=".")
    return buf.getvalue()


def _unpack(blob: bytes, d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        tar.extractall(d, filter="data")


def _ray_attempt(
    cell: Cell,
    jdir: str,
    shard: int,
    shards: int,
    num_gpus: float,
    ship: bool,
    shipped: bytes | None,
    cwd: str,
) -> tuple[Attempt, bytes | None]:
    """Runs on a Ray worker. With `ship` there is no shared output path: the job folder (`shipped`, None on a first
    attempt) travels to the worker and back as a tarball; otherwise the worker writes straight into `jdir`."""
    if not ship:
        return attempt(cell, Path(jdir), shard, shards, num_gpus, cwd=cwd), None
    with tempfile.TemporaryDirectory(prefix="rig-cell-") as tmp:
        local = Path(tmp) / "job"
        if shipped:
            _unpack(shipped, local)
        res = attempt(cell, local, shard, shards, num_gpus, cwd=cwd)
        return res, _pack(local)


# ---- the driver --------------------------------------------------------------------------------------------


class SweepResult(BaseModel):
    jobs: list[JobState]
    cells: dict[str, str | None]  # cell key -> the run folder its leaderboard row reads (None: failed)
    failed: list[str]


def local_gpus() -> list[str]:
    """GPUs this process may use: CUDA_VISIBLE_DEVICES when set, else what nvidia-smi lists (none without one)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


Job = tuple[Cell, int, Path, JobState]
Outcome = Future[tuple[Attempt, bytes | None]]


class _Ray:
    """Cells as Ray tasks with the cell's resources; Ray queues them until the cluster has room."""

    def __init__(self, address: str, spec: SweepSpec, ship: bool, width: int) -> None:
        import ray as ray_mod

        if not ray_mod.is_initialized():
            # "local": a one-machine cluster on loopback (no network needed); "auto" or an address: join a cluster
            local: dict[str, Any] = (
                {"address": "local", "_node_ip_address": "127.0.0.1"} if address == "local" else {"address": address}
            )
            ray_mod.init(**local, include_dashboard=False, log_to_driver=False, configure_logging=False)
        res = spec.resources
        self.task = ray_mod.remote(max_retries=0)(_ray_attempt)
        self.opts: dict[str, Any] = {"num_cpus": res.num_cpus, "num_gpus": res.num_gpus}
        if res.memory_gb:
            self.opts["memory"] = int(res.memory_gb * 2**30)
        self.spec, self.ship, self.width = spec, ship, width

    def room(self) -> bool:
        return True

    def submit(self, c: Cell, s: int, jd: Path) -> Outcome:
        blob = _pack(jd) if self.ship else None
        res = self.spec.resources
        args = (c, str(jd), s, self.spec.shards, res.num_gpus, self.ship, blob, os.getcwd())
        return self.task.options(**self.opts).remote(*args).future()

    def done(self, fut: Outcome) -> None:
        pass

    def close(self) -> None:
        pass


class _Local:
    """Cells as threads on this machine, each given the GPUs it asks for while it runs."""

    def __init__(self, spec: SweepSpec, parallel: int | None) -> None:
        self.spec = spec
        self.gpus = local_gpus()
        self.free = list(self.gpus)
        self.need = int(spec.resources.num_gpus + 0.999) if self.gpus else 0
        if parallel is None:
            num_gpus = spec.resources.num_gpus
            parallel = max(1, int(len(self.gpus) // num_gpus)) if num_gpus > 0 and self.gpus else 1
        self.width = parallel
        self.pool = ThreadPoolExecutor(max_workers=parallel)
        self.held: dict[int, list[str]] = {}

    def room(self) -> bool:
        return not (self.spec.resources.num_gpus > 0 and self.gpus and len(self.free) < self.need)

    def submit(self, c: Cell, s: int, jd: Path) -> Outcome:
        devs, self.free[:] = self.free[: self.need], self.free[self.need :]
        res = self.spec.resources

        def run() -> tuple[Attempt, bytes | None]:
            return attempt(c, jd, s, self.spec.shards, res.num_gpus, devs), None

        fut = self.pool.submit(run)
        self.held[id(fut)] = devs
        return fut

    def done(self, fut: Outcome) -> None:
        self.free.extend(self.held.pop(id(fut), []))

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def run_sweep(
    spec: SweepSpec,
    cells: list[Cell],
    out: Path,
    *,
    parallel: int | None = None,
    ray: str | None = None,
    ship: bool = False,
    on_update: Callable[[list[JobState], Path], Any] | None = None,
    say: Callable[[str], Any] = print,
) -> SweepResult:
    """Run every cell (and shard) not yet finished under `out`; retry the ones whose process died; merge shards."""
    out = out.resolve()  # the cells' processes and Ray workers run in other folders
    out.mkdir(parents=True, exist_ok=True)
    _earlier_cells(out, cells, say)
    jobs = _jobs(out, cells, spec.shards)
    todo = [j for j in jobs if j[3].status == "pending"]
    if len(jobs) > len(todo):
        say(f"{len(jobs) - len(todo)} of {len(jobs)} jobs already finished; skipped")
    sched: _Ray | _Local = _Ray(ray, spec, ship, len(todo) or 1) if ray is not None else _Local(spec, parallel)

    def report() -> None:
        if on_update:
            on_update([j[3] for j in jobs], out)

    try:
        _drive(spec, sched, todo, report, say)
    finally:
        sched.close()
    return _results(out, cells, jobs, spec.shards)


def _earlier_cells(out: Path, cells: list[Cell], say: Callable[[str], Any]) -> None:
    """Earlier rigs ran a sweep cell with decode json or yaml under tool mode prompt unless the file said otherwise;
    such a cell's folder is not this cell's (its tool mode differs), so say how to resume it instead."""
    for c in cells:
        if c.tool_mode == "prompt" or c.tool_mode != default_tool_mode(c.decode):
            continue
        earlier = c.model_copy(update={"tool_mode": "prompt"})
        if (out / "cells" / earlier.key).exists():
            say(
                f"{out / 'cells' / earlier.key}: an earlier rig ran {c.model} on {c.benchmark} with decode {c.decode} "
                f"under tool mode prompt; this sweep runs tool mode {c.tool_mode} (as rig bench does). Add "
                "tool_mode: [prompt] to the sweep file to resume those cells instead."
            )


def _jobs(out: Path, cells: list[Cell], shards: int) -> list[Job]:
    jobs = []
    for c in cells:
        for s in range(shards):
            jd = job_dir(out, c, s, shards)
            st = _read_state(jd) or JobState(cell=c.key, shard=s, shards=shards)
            st.errors = []
            st.status = "done" if jd.exists() and finished(jd) else "pending"
            jobs.append((c, s, jd, st))
    return jobs


def _drive(
    spec: SweepSpec, sched: _Ray | _Local, todo: list[Job], report: Callable[[], None], say: Callable[[str], Any]
) -> None:
    """Start jobs while there is room, record each attempt as it ends, requeue the ones to retry."""
    running: dict[Outcome, Job] = {}
    queue = list(todo)
    started: dict[int, float] = {}
    tries: dict[int, int] = {}  # attempts in this sweep run
    while queue or running:
        while queue and len(running) < sched.width and sched.room():
            c, s, jd, st = job = queue.pop(0)
            jd.mkdir(parents=True, exist_ok=True)
            st.status = "running"
            st.attempts += 1
            tries[id(st)] = tries.get(id(st), 0) + 1
            _write_state(jd, st)
            started[id(st)] = time.perf_counter()
            running[sched.submit(c, s, jd)] = job
        report()
        done, _ = wait(list(running), timeout=1.0, return_when=FIRST_COMPLETED)
        for fut in done:
            job = running.pop(fut)
            job[3].wall_s = time.perf_counter() - started[id(job[3])]
            sched.done(fut)
            if _record(job, _outcome(fut, job[2]), tries[id(job[3])], spec.max_retries, say):
                queue.append(job)
        report()


def _outcome(fut: Outcome, jd: Path) -> Attempt:
    try:
        a, blob = fut.result()
        if blob is not None:
            _unpack(blob, jd)
        return a
    except Exception as e:  # the worker or its node died: the store in jd is what survived
        return Attempt(
            returncode=-1, finished=finished(jd), run_id=None, node="?", error=f"worker lost: {type(e).__name__}: {e}"
        )


def _record(job: Job, a: Attempt, tries: int, max_retries: int, say: Callable[[str], Any]) -> bool:
    """An attempt's end in the job's state (and job.json); True when the job is to be tried again. ``tries``: its
    attempts in this sweep run (a re-run gives a failed cell its retries afresh)."""
    _c, _s, jd, st = job
    disk = _read_state(jd)
    if disk is not None:  # the attempt's own record (pid, node, resumed count)
        st.pid, st.node, st.resumed = disk.pid, disk.node, disk.resumed
    st.run_id, st.process_s = a.run_id or st.run_id, a.process_s
    retry = False
    if a.finished:
        st.status = "done"
    elif a.returncode == 2 or tries > max_retries:
        # exit 2 is bad input: the same command would fail the same way, so it is not retried
        st.status = "failed"
        st.errors.append(a.error or "failed")
        say(f"cell {st.name} failed after {tries} attempt(s): {a.error}")
    else:
        st.errors.append(a.error or "failed")
        say(f"cell {st.name}: {a.error}; retrying (attempt {st.attempts + 1})")
        st.status, retry = "pending", True
    _write_state(jd, st)
    return retry


def _results(out: Path, cells: list[Cell], jobs: list[Job], shards: int) -> SweepResult:
    """Each cell's run folder for the leaderboard (its shards merged into one), or None when a job failed."""
    from rig.sweep.merge import merge_runs

    result_dirs: dict[str, str | None] = {}
    failed = []
    for c in cells:
        cj = [j for j in jobs if j[0].key == c.key]
        if any(j[3].status != "done" for j in cj):
            result_dirs[c.key] = None
            failed.append(c.key)
            continue
        runs = [run_folder(j[2]) for j in cj]
        if shards == 1:
            result_dirs[c.key] = str(runs[0])
        else:
            merged = out / "cells" / c.key / "merged"
            if not (merged.exists() and run_folder(merged) is not None):
                shutil.rmtree(merged, ignore_errors=True)
                merge_runs([r for r in runs if r is not None], merged)
            result_dirs[c.key] = str(run_folder(merged))
    return SweepResult(jobs=[j[3] for j in jobs], cells=result_dirs, failed=failed)
