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
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from rig.execution.bench import BenchError, RunLock
from rig.execution.launch import bench_argv
from rig.records import read_record, write_record
from rig.runfolder.folder import RunFolder
from rig.sweep.spec import Cell, SweepSpec

BENCH_ENTRY = ("-m", "rig.cli")  # what follows the interpreter in a cell's command; tests swap in a fake engine
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
    entry: Sequence[str],
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
    argv[1:3] = list(entry)
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
    entry: Sequence[str],
    ship: bool,
    shipped: bytes | None,
    cwd: str,
) -> tuple[Attempt, bytes | None]:
    """Runs on a Ray worker. With `ship` there is no shared output path: the job folder (`shipped`, None on a first
    attempt) travels to the worker and back as a tarball; otherwise the worker writes straight into `jdir`."""
    if not ship:
        return attempt(cell, Path(jdir), shard, shards, num_gpus, entry, cwd=cwd), None
    with tempfile.TemporaryDirectory(prefix="rig-cell-") as tmp:
        local = Path(tmp) / "job"
        if shipped:
            _unpack(shipped, local)
        res = attempt(cell, local, shard, shards, num_gpus, entry, cwd=cwd)
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


def run_sweep(
    spec: SweepSpec,
    cells: list[Cell],
    out: Path,
    *,
    parallel: int | None = None,
    ray: str | None = None,
    ship: bool = False,
    entry: Sequence[str] = BENCH_ENTRY,
    on_update: Callable[[list[JobState], Path], Any] | None = None,
    say: Callable[[str], Any] = print,
) -> SweepResult:
    """Run every cell (and shard) not yet finished under `out`; retry the ones whose process died; merge shards."""
    from rig.sweep.merge import merge_runs

    out = out.resolve()  # the cells' processes and Ray workers run in other folders
    out.mkdir(parents=True, exist_ok=True)
    shards = spec.shards
    jobs: list[tuple[Cell, int, Path, JobState]] = []
    for c in cells:
        for s in range(shards):
            jd = job_dir(out, c, s, shards)
            st = _read_state(jd) or JobState(cell=c.key, shard=s, shards=shards)
            st.errors = []
            st.status = "done" if jd.exists() and finished(jd) else "pending"
            jobs.append((c, s, jd, st))
    todo = [j for j in jobs if j[3].status == "pending"]
    skipped = len(jobs) - len(todo)
    if skipped:
        say(f"{skipped} of {len(jobs)} jobs already finished; skipped")
    res = spec.resources
    submit: Callable[[Cell, int, Path], Future[tuple[Attempt, bytes | None]]]
    gpus = local_gpus()
    free_gpus = list(gpus)
    held: dict[int, list[str]] = {}
    pool: ThreadPoolExecutor | None = None
    if ray is not None:
        import ray as ray_mod

        if not ray_mod.is_initialized():
            # "local": a one-machine cluster on loopback (no network needed); "auto" or an address: join a cluster
            local: dict[str, Any] = (
                {"address": "local", "_node_ip_address": "127.0.0.1"} if ray == "local" else {"address": ray}
            )
            ray_mod.init(**local, include_dashboard=False, log_to_driver=False, configure_logging=False)
        task = ray_mod.remote(max_retries=0)(_ray_attempt)
        opts: dict[str, Any] = {"num_cpus": res.num_cpus, "num_gpus": res.num_gpus}
        if res.memory_gb:
            opts["memory"] = int(res.memory_gb * 2**30)

        def submit(c: Cell, s: int, jd: Path) -> Future[tuple[Attempt, bytes | None]]:
            blob = _pack(jd) if ship else None
            ref = task.options(**opts).remote(c, str(jd), s, shards, res.num_gpus, list(entry), ship, blob, os.getcwd())
            return ref.future()

        width = len(todo) or 1  # Ray queues tasks until the cluster has their resources
    else:
        if parallel is None:
            parallel = max(1, int(len(gpus) // res.num_gpus)) if res.num_gpus > 0 and gpus else 1
        width = parallel
        pool = ThreadPoolExecutor(max_workers=parallel)

        def run_local(c: Cell, s: int, jd: Path, devs: list[str]) -> tuple[Attempt, bytes | None]:
            return attempt(c, jd, s, shards, res.num_gpus, entry, devs), None

        def submit(c: Cell, s: int, jd: Path) -> Future[tuple[Attempt, bytes | None]]:
            n = int(res.num_gpus + 0.999) if gpus else 0
            devs, free_gpus[:] = free_gpus[:n], free_gpus[n:]
            assert pool is not None
            fut = pool.submit(run_local, c, s, jd, devs)
            held[id(fut)] = devs
            return fut

    running: dict[Future[tuple[Attempt, bytes | None]], tuple[Cell, int, Path, JobState]] = {}
    queue = list(todo)
    started: dict[int, float] = {}
    tries: dict[int, int] = {}  # attempts in this sweep run: a re-run gives a failed cell its retries afresh

    def report() -> None:
        if on_update:
            on_update([j[3] for j in jobs], out)

    try:
        while queue or running:
            while queue and len(running) < width:
                if ray is None and res.num_gpus > 0 and gpus and len(free_gpus) < int(res.num_gpus + 0.999):
                    break
                c, s, jd, st = queue.pop(0)
                jd.mkdir(parents=True, exist_ok=True)
                st.status = "running"
                st.attempts += 1
                tries[id(st)] = tries.get(id(st), 0) + 1
                _write_state(jd, st)
                started[id(st)] = time.perf_counter()
                running[submit(c, s, jd)] = (c, s, jd, st)
            report()
            done, _ = wait(list(running), timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                c, s, jd, st = running.pop(fut)
                st.wall_s = time.perf_counter() - started[id(st)]
                free_gpus.extend(held.pop(id(fut), []))
                try:
                    a, blob = fut.result()
                    if blob is not None:
                        _unpack(blob, jd)
                except Exception as e:  # the worker or its node died: the store in jd is what survived
                    a = Attempt(
                        returncode=-1,
                        finished=finished(jd),
                        run_id=None,
                        node="?",
                        error=f"worker lost: {type(e).__name__}: {e}",
                    )
                disk = _read_state(jd)
                if disk is not None:  # the attempt's own record (pid, node, resumed count)
                    st.pid, st.node, st.resumed = disk.pid, disk.node, disk.resumed
                st.run_id, st.process_s = a.run_id or st.run_id, a.process_s
                if a.finished:
                    st.status = "done"
                elif a.returncode == 2 or tries[id(st)] > spec.max_retries:
                    # exit 2 is bad input: the same command would fail the same way, so it is not retried
                    st.status = "failed"
                    st.errors.append(a.error or "failed")
                    say(f"cell {st.name} failed after {tries[id(st)]} attempt(s): {a.error}")
                else:
                    st.errors.append(a.error or "failed")
                    say(f"cell {st.name}: {a.error}; retrying (attempt {st.attempts + 1})")
                    st.status = "pending"
                    queue.append((c, s, jd, st))
                _write_state(jd, st)
            report()
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
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
