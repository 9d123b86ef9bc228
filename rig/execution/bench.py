"""`rig bench` as a library call: config -> run directory with manifest, results and report."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import random
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rig import offline
from rig.benchmarks import BENCHMARKS, get_benchmark_class
from rig.benchmarks.base import Benchmark, DataError, RunContext
from rig.bundle import BundleError, bundle_id_for
from rig.engines import create_engine
from rig.execution.runner import plan, run_items
from rig.records import Episode, Sampling
from rig.registry import ModelSpec, default_registry_path, load_registry, resolve_weights
from rig.runfolder.config import BenchmarkInfo, RunConfig
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest, new_run_id, package_versions
from rig.runfolder.spec import RunSpec, read_spec, spec_error
from rig.runfolder.store import Store
from rig.runformat import storage_error
from rig.telemetry.bandwidth import cached_probe
from rig.telemetry.energy import EnergyMeter, open_counter
from rig.telemetry.gpu import GpuSampler
from rig.telemetry.mbu import weights_profile


class BenchError(Exception):
    """A problem with the request (not with a model output); str() is shown to the user."""


class BenchOptions(RunSpec):
    """The library call of `rig bench`: a RunSpec, and where its run folder goes."""

    out: Path = Path("runs")
    resume: str | None = None
    idle_window_s: float = 2.0  # idle power is measured this long before the model loads (with an energy counter)


def bench_options(
    flags: dict[str, Any], spec_file: Path | None = None, default_model: str | None = None
) -> BenchOptions:
    """The run a command asks for: a spec file's settings (``rig bench --spec``), overridden by the flags given.
    ``flags`` holds only what the user gave (and where the run goes): with ``--resume`` the rest comes from the run's
    record. A bad value is a SpecError naming the flag, or the file and its field."""
    base = read_spec(spec_file).spec_fields() if spec_file is not None else {}
    if "decode" in flags and "tool_mode" not in flags:
        base.pop("tool_mode", None)  # follows the decode given now, not the file's
    merged = {**base, **flags}
    if "options" in base and "options" in flags:
        merged["options"] = {**base["options"], **flags["options"]}
    if merged.get("model") is None and merged.get("resume") is None and default_model is not None:
        merged["model"] = default_model
    try:
        return BenchOptions.model_validate(merged)
    except ValidationError as e:
        raise spec_error(e) from None


def shard_of(episodes: list[Episode], shard: str | None) -> list[Episode]:
    """Shard i of N of the selected questions (every N-th question from i, all tasks of a question together), so the
    N shards of one selection partition it exactly."""
    if shard is None:
        return episodes
    i, n = parse_shard(shard)
    units = list(dict.fromkeys(e.tags.get("question", e.id) for e in episodes))
    keep = set(units[i::n])
    return [e for e in episodes if e.tags.get("question", e.id) in keep]


def parse_shard(shard: str) -> tuple[int, int]:
    head, _, tail = shard.partition("/")
    try:
        i, n = int(head), int(tail)
    except ValueError:
        raise BenchError(f"--shard {shard!r}: expected I/N with 0 <= I < N, e.g. 0/2") from None
    if not 0 <= i < n:
        raise BenchError(f"--shard {shard!r}: expected I/N with 0 <= I < N, e.g. 0/2")
    return i, n


def select(episodes: list[Episode], limit: int | None, seed: int) -> list[Episode]:
    """A seeded, order-preserving sample of ``limit`` units (a unit = a question with all its tasks)."""
    if limit is None:
        return episodes
    units = list(dict.fromkeys(e.tags.get("question", e.id) for e in episodes))
    if limit >= len(units):
        return episodes
    keep = set(random.Random(seed).sample(units, limit))
    return [e for e in episodes if e.tags.get("question", e.id) in keep]


def _route_options(options: dict[str, Any], names: list[str], *, single: bool) -> dict[str, dict[str, Any]]:
    """``-O bench.key=v`` goes to that benchmark; a bare ``key=v`` only when one benchmark is named (each benchmark
    has its own options, so a bare key in a run of all of them would be refused by some and skipped silently)."""
    per: dict[str, dict[str, Any]] = {n: {} for n in names}
    for key, value in options.items():
        head, _, rest = key.partition(".")
        if rest and head in BENCHMARKS:
            if head not in per:
                raise BenchError(f"--option {key}: this run does not include benchmark {head!r}")
            per[head][rest] = value
        elif single:
            per[names[0]][key] = value
        else:
            raise BenchError(
                f"--option {key}: without --benchmark, name the benchmark it is for "
                f"(e.g. -O callnavi.{key}=...; benchmarks: {', '.join(sorted(BENCHMARKS))})"
            )
    return per


def _build(opts: BenchOptions) -> tuple[ModelSpec, str, list[tuple[Benchmark, list[Episode]]], RunConfig, list[str]]:
    assert opts.model is not None  # run_bench refuses options without one
    reg = load_registry(opts.models_file)
    spec = reg.get(opts.model)
    # sampling overrides: the RunSpec fields that are Sampling fields (temperature, seed, max_tokens), when set
    upd = {
        k: getattr(opts, k) for k in Sampling.model_fields if k in RunSpec.model_fields and getattr(opts, k) is not None
    }
    if upd:
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update=upd)})
    weights = resolve_weights(spec, reg.path)
    names = [opts.benchmark] if opts.benchmark else sorted(BENCHMARKS)
    if opts.data is not None and len(names) > 1:
        raise BenchError("--data names one benchmark's data: pass --benchmark too")
    routed = _route_options(opts.options, names, single=opts.benchmark is not None)
    chosen, infos, skipped = [], [], []
    for name in names:
        cls = get_benchmark_class(name)
        bench_opts = {**cls.implied_options(opts.decode), **routed[name]}
        try:
            bench = cls(opts.data, bench_opts)
            conflict = cls.conflicts(bench.opts, opts.decode, opts.tool_mode)
            if conflict is not None:
                raise BenchError(conflict)
            episodes = shard_of(select(bench.episodes(), opts.limit, spec.sampling.seed), opts.shard)
        except DataError as e:
            if opts.benchmark:  # asked for by name: its data problem is the user's to fix
                raise
            skipped.append(f"{name}: {e}")
            continue
        if not episodes:
            if opts.benchmark:
                raise BenchError(f"{bench.data}: no episodes to run")
            skipped.append(f"{name}: no episodes in {bench.data}")
            continue
        chosen.append((bench, episodes))
        infos.append(BenchmarkInfo.of(bench, len(episodes)))
    if not chosen:
        raise BenchError("no benchmark has data available:\n  " + "\n  ".join(skipped))
    s = spec.sampling
    cfg = RunConfig(
        model=spec,
        benchmarks=infos,
        repeats=opts.repeats,
        limit=opts.limit,
        decode=opts.decode,
        tool_mode=opts.tool_mode,
        seed=s.seed,
        temperature=s.temperature,
        max_tokens=s.max_tokens,
        gpu=opts.gpu,
        shard=opts.shard,
    )
    return spec, weights, chosen, cfg, skipped


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def _check_flags(opts: BenchOptions) -> None:
    """Flag problems, found before anything is loaded or written."""
    if opts.resume is not None and (
        not opts.resume or opts.resume in (".", "..") or "/" in opts.resume or os.sep in opts.resume
    ):
        raise BenchError(f"--resume {opts.resume!r}: give a run id (a folder name inside --out {opts.out})")
    if opts.out.exists() and not opts.out.is_dir():
        raise BenchError(f"--out {opts.out}: is a file, not a folder")


# Settings that are the invocation's, not the run's: --resume never takes them from the record.
NOT_RESUMED = {"models_file", "concurrency"}


def resume_options(opts: BenchOptions, old: RunManifest) -> BenchOptions:
    """``opts`` with every run setting it does not set explicitly taken from the run's recorded RunSpec. Explicit
    ones (with or without --model) are kept, so a changed one makes the configuration differ and the resume is
    refused."""
    recorded = old.run_spec()
    given = opts.model_fields_set
    update = {k: getattr(recorded, k) for k in RunSpec.model_fields if k not in given and k not in NOT_RESUMED}
    if "options" in given:  # given options change the recorded ones; the rest stay as recorded
        update["options"] = {**recorded.options, **opts.options}
    return opts.model_copy(update=update)


class RunLock:
    """An exclusive lock on a run folder for as long as one process runs it (released by the kernel on any exit,
    SIGKILL included), so two processes never run the same episodes."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "run.lock"
        try:
            self.fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise BenchError(f"{self.path}: cannot create the run lock ({e.strerror})") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(self.fd)
            self.fd = None
            raise BenchError(
                f"{run_dir}: another rig process (pid {holder}) is running this run; wait for it to end "
                "or stop it first"
            ) from None
        with contextlib.suppress(OSError):  # the pid is only for the message above: a full disk must not stop here
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def run_bench(
    opts: BenchOptions, progress: Callable[[int, int], Any] | None = None, on_event: Callable[[str], None] | None = None
) -> Path:
    """Run (or resume) benchmarks on one model, in one run with one manifest; return the run directory."""
    try:
        offline.install()
    except offline.AllowListError as e:
        raise BenchError(str(e)) from None
    say = on_event or (lambda _m: None)
    _check_flags(opts)
    lock = None
    if opts.resume:
        run_dir = opts.out / opts.resume
        if not (run_dir / "manifest.json").exists():
            raise BenchError(f"--resume {opts.resume}: {run_dir / 'manifest.json'} not found")
        lock = RunLock(run_dir)
        try:
            old = RunFolder(run_dir).manifest
            Store(run_dir / "results.sqlite").close()  # refuses a results database from a newer rig before any write
        except BaseException:
            lock.release()
            raise
        opts = resume_options(opts, old)
    if opts.model is None:
        raise BenchError("--model is required (see `rig models`)")
    try:
        spec, weights, chosen, cfg, skipped = _build(opts)
        if opts.resume:
            if cfg.digest() != old.config_hash:
                changes = _diff(old.config.model_dump(mode="json"), cfg.model_dump(mode="json"))
                raise BenchError(
                    f"--resume {opts.resume}: the configuration changed since the run started, refusing "
                    "to mix results:\n  " + "\n  ".join(changes[:10])
                )
            manifest = old
            manifest.status = "running"
            manifest.allowed_hosts = list(dict.fromkeys([*manifest.allowed_hosts, *offline.allowed_entries()]))
        else:
            try:
                # Computed from the MANIFEST.json read now, never the id it claims; before the run folder exists.
                bundle_id = bundle_id_for(opts.models_file or default_registry_path())
            except BundleError as e:
                raise BenchError(str(e)) from None
            run_id = new_run_id(spec.name, "+".join(b.name for b, _ in chosen))
            run_dir = opts.out / run_id
            try:
                run_dir.mkdir(parents=True, exist_ok=False)
            except OSError as e:
                raise BenchError(f"--out {opts.out}: cannot create the run folder {run_dir} ({e.strerror})") from None
            lock = RunLock(run_dir)
            manifest = RunManifest.begin(
                run_id,
                cfg,
                spec=RunSpec.model_validate(opts.model_dump(include=set(RunSpec.model_fields))),
                concurrency=opts.concurrency,
                order=opts.order,
                bundle_id=bundle_id,
                allowed_hosts=offline.allowed_entries(),
            )
        try:
            manifest.write(run_dir)
        except OSError as e:
            if (full := storage_error(e, run_dir)) is not None:
                raise full from None
            raise BenchError(f"--out {opts.out}: cannot write {run_dir / 'manifest.json'} ({e.strerror})") from None
        except ValueError as e:  # a configuration the manifest cannot hold: refused before any episode runs
            if not opts.resume and lock is not None:
                lock.release()
                lock = None
                with contextlib.suppress(OSError):
                    (run_dir / "run.lock").unlink()
                    run_dir.rmdir()
            raise BenchError(str(e)) from None
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    for line in skipped:
        say(f"skipped {line}")
    try:
        return _run(opts, spec, weights, chosen, manifest, run_dir, progress, say)
    except (OSError, sqlite3.Error) as e:
        full = storage_error(e, run_dir)
        if full is None:
            raise
        raise full from None
    finally:
        if lock is not None:
            lock.release()


def _run(
    opts: BenchOptions,
    spec: ModelSpec,
    weights: str,
    chosen: list[tuple[Benchmark, list[Episode]]],
    manifest: RunManifest,
    run_dir: Path,
    progress: Callable[[int, int], Any] | None,
    say: Callable[[str], None],
) -> Path:
    # Engines' native library logs ("rig.native") are kept in the run folder for debugging, off the terminal.
    native = logging.getLogger("rig.native")
    log_file = _LogFile(run_dir / "engine.log", encoding="utf-8")
    log_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    native.addHandler(log_file)
    native.setLevel(logging.INFO)
    say(
        f"run {manifest.run_id}: {spec.name} on "
        + ", ".join(f"{b.name} ({len(e)} episodes)" for b, e in chosen)
        + f" x {opts.repeats} repeats"
    )
    store = Store(run_dir / "results.sqlite")
    sampler = GpuSampler(opts.gpu)
    sampler.start()
    meter = EnergyMeter(*open_counter(opts.gpu))
    energy = meter.record()
    if manifest.energy is not None and manifest.energy.source == energy.source:  # a resume adds a session
        energy.sessions = manifest.energy.sessions
    meter.measure_idle(opts.idle_window_s)
    manifest.bandwidth, manifest.bandwidth_reason = cached_probe(opts.gpu)
    manifest.weights_profile, manifest.weights_reason = weights_profile(weights)
    items = plan(chosen, opts.repeats, order=opts.order, seed=spec.sampling.seed)
    ctx = RunContext(sampling=spec.sampling, decode=opts.decode, tool_mode=opts.tool_mode)
    resume_hint = f"rig bench --resume {manifest.run_id} --out {opts.out}"

    async def go() -> bool:
        """Run to the end (True) or until SIGINT/SIGTERM (False). A signal abandons the episodes in flight (they
        are not stored, so --resume reruns them) but waits for the engine call in flight to return before the
        engine is closed: closing llama.cpp under a decoding thread crashes the process."""
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        assert main is not None
        executor = ThreadPoolExecutor(thread_name_prefix="rig-engine")
        loop.set_default_executor(executor)  # engine calls run here (asyncio.to_thread)
        stopping: list[int] = []

        def on_signal(signum: int) -> None:
            if not stopping:
                say(f"{signal.Signals(signum).name}: stopping; episodes in flight are abandoned and rerun on resume")
                main.cancel()
            else:
                say("still waiting for the engine call in flight to return")
            stopping.append(signum)

        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, RuntimeError):  # only the main thread can take signals
                loop.add_signal_handler(sig, on_signal, sig)
                handled.append(sig)
        engine = None
        try:
            engine = create_engine(spec, weights, gpu=opts.gpu)
            engine.meter = meter
            t = time.perf_counter()
            await engine.load()
            if manifest.load_time_s is None:
                manifest.load_time_s = time.perf_counter() - t
            sampler.mark_loaded()
            manifest.versions = package_versions() | engine.versions()
            manifest.write(run_dir)
            done = [len(store.done_keys())]
            if progress:
                progress(done[0], len(items))

            def tick(_res: Any) -> None:
                done[0] += 1
                if progress:
                    progress(done[0], len(items))

            await run_items(items, engine, store, ctx, concurrency=opts.concurrency, on_done=tick, meter=meter)
            return True
        except asyncio.CancelledError:
            if not stopping:
                raise
            return False
        finally:
            # Calls abandoned by a cancel still run in their threads: wait for them on a fresh executor's thread.
            loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="rig-close"))
            await _uncancellable(asyncio.to_thread(executor.shutdown, wait=True))
            if engine is not None:
                manifest.engine_info = engine.describe()
                await _uncancellable(engine.close())
            for sig in handled:
                loop.remove_signal_handler(sig)

    prev = signal.getsignal(signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:  # outside the event loop (before it starts) SIGTERM stops the run like Ctrl-C does
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    raised = False
    try:
        finished = asyncio.run(go())
        manifest.status = "finished" if finished else "interrupted"
    except KeyboardInterrupt:
        manifest.status = "interrupted"
    except BaseException:
        raised = True
        manifest.status = "failed"  # a failed load or a broken run is not left "running"
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, prev)
        gpu = sampler.stop()
        with contextlib.suppress(sqlite3.Error):  # telemetry only; the results are already committed
            store.write_gpu_samples(gpu.samples)
        gpu.samples = []  # kept in the store, not the manifest
        manifest.gpu_memory = gpu
        energy.sessions.append(meter.finish())
        energy.reason = meter.reason if meter.counter is None else None
        manifest.energy = energy
        from rig.telemetry.process import peak_rss_bytes

        manifest.peak_rss_bytes = max(manifest.peak_rss_bytes or 0, peak_rss_bytes())
        manifest.finished_at = time.time()
        unwritten = None
        try:
            manifest.write(run_dir)
        except OSError as e:  # the manifest on disk stays the last one written whole (write_record is atomic)
            unwritten = e
        store.close()
        if manifest.status == "interrupted":
            say(f"interrupted; resume with: {resume_hint}")
        elif manifest.status == "failed":
            say(f"run {manifest.run_id} failed; after fixing the cause, resume with: {resume_hint}")
        native.removeHandler(log_file)
        log_file.close()
        if unwritten is not None and not raised:  # else the run's own error is the one to show
            raise unwritten
    return run_dir


class _LogFile(logging.FileHandler):
    """engine.log: a debugging aid, so a line that cannot be written (a full disk) is dropped, not printed to the
    terminal with a traceback by logging's default handler."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass


async def _uncancellable(aw: Any) -> Any:
    """Await ``aw`` to the end even if this task is cancelled again meanwhile (a second Ctrl-C)."""
    task = asyncio.ensure_future(aw)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                return task.result()
