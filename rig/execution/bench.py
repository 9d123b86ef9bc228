"""`rig bench` as a library call: config -> run directory with manifest, results and report."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rig import offline, plugins
from rig.benchmarks import benchmark_names, get_benchmark_class
from rig.benchmarks.base import Benchmark, DataError, RunContext
from rig.bundle import BundleError, bundle_id_for
from rig.engines import MissingExtra, create_engine, engine_class
from rig.execution.runner import plan
from rig.execution.turn import Turn, close_engine_log, engine_log
from rig.interrupt import sigterm_as_interrupt
from rig.paths import RUNS
from rig.plugins import PluginError
from rig.records import Episode, OutputError, Sampling, claim_folder
from rig.registry import ModelSpec, default_registry_path, load_registry, resolve_weights
from rig.runfolder.config import BenchmarkInfo, RunConfig
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest, new_run_id
from rig.runfolder.spec import RunSettings, RunSpec, make_spec, parse_shard, pass_k_error, read_spec, setting
from rig.runfolder.store import Store
from rig.runformat import storage_error


class BenchError(Exception):
    """A problem with the request (not with a model output); str() is shown to the user."""


class BenchOptions(RunSpec):
    """The library call of `rig bench`: a RunSpec, and where its run folder goes."""

    out: Path = RUNS
    resume: str | None = None
    idle_window_s: float = 2.0  # idle power is measured this long before the model loads (with an energy counter)

    def _repeats_known(self) -> bool:
        return self.resume is None or "repeats" in self.model_fields_set


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
    return make_spec(merged, BenchOptions)


def shard_of(episodes: list[Episode], shard: str | None) -> list[Episode]:
    """Shard i of N of the selected questions (every N-th question from i, all tasks of a question together), so the
    N shards of one selection partition it exactly."""
    if shard is None:
        return episodes
    i, n = parse_shard(shard)
    units = list(dict.fromkeys(e.tags.get("question", e.id) for e in episodes))
    keep = set(units[i::n])
    return [e for e in episodes if e.tags.get("question", e.id) in keep]


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
        if rest and head in benchmark_names():
            if head not in per:
                raise BenchError(f"--option {key}: this run does not include benchmark {head!r}")
            per[head][rest] = value
        elif single:
            per[names[0]][key] = value
        else:
            raise BenchError(
                f"--option {key}: without --benchmark, name the benchmark it is for "
                f"(e.g. -O callnavi.{key}=...; benchmarks: {', '.join(benchmark_names())})"
            )
    return per


def _build(opts: BenchOptions) -> tuple[ModelSpec, str, list[tuple[Benchmark, list[Episode]]], RunConfig, list[str]]:
    assert opts.model is not None  # run_bench refuses options without one
    reg = load_registry(opts.models_file)
    spec = reg.get(opts.model)
    # sampling overrides: the run settings that are Sampling fields (temperature, seed, max_tokens), when set
    upd = {
        k: getattr(opts, k)
        for k in Sampling.model_fields
        if k in RunSettings.model_fields and getattr(opts, k) is not None
    }
    if upd:
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update=upd)})
    # A sampling field or engine argument the engine cannot take is refused before anything runs, naming entry and
    # field (a missing backend is named when the engine is made, as before).
    with contextlib.suppress(MissingExtra):
        engine_class(spec.engine).check(spec)
    weights = resolve_weights(spec, reg.path)
    names = [opts.benchmark] if opts.benchmark else benchmark_names()
    if opts.data is not None and len(names) > 1:
        raise BenchError("--data names one benchmark's data: pass --benchmark too")
    routed = _route_options(opts.options, names, single=opts.benchmark is not None)
    chosen, infos, skipped = [], [], []
    for name in names:
        try:
            cls = get_benchmark_class(name)
            bench_opts = {**cls.implied_options(opts.decode), **routed[name]}
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
        except (Exception, SystemExit) as e:  # a plugin's failure, even sys.exit(), is the plugin's, named
            plugin = plugins.installed(plugins.BENCHMARK_GROUP, name)
            if plugin is None or (opts.benchmark and isinstance(e, BenchError)):
                raise
            failed = e if isinstance(e, PluginError) else PluginError(f"{plugin}: {type(e).__name__}: {e}")
            if opts.benchmark:  # asked for by name: the run stops, naming it
                raise failed from e
            skipped.append(str(failed))  # in a run of every benchmark it is skipped: never rig's own ones
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
    cfg = RunConfig.of(spec, infos, opts)
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


def resume_options(opts: BenchOptions, old: RunManifest) -> BenchOptions:
    """``opts`` with every run setting it does not set explicitly taken from the run's recorded RunSpec. Explicit
    ones (with or without --model) are kept, so a changed one makes the configuration differ and the resume is
    refused."""
    recorded = old.run_spec()
    given = opts.model_fields_set
    # A setting that is the invocation's, not the run's (Setting.resumed), is never taken from the record.
    update = {k: getattr(recorded, k) for k, f in RunSpec.model_fields.items() if k not in given and setting(f).resumed}
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
    old, lock = None, None
    if opts.resume:
        opts, old, lock = _open_resume(opts)
    try:
        if opts.pass_k is not None and (why := pass_k_error(opts.pass_k, opts.repeats)):
            raise BenchError(why)  # a resumed run's repeats come from its record
        if opts.model is None:
            raise BenchError("--model is required (see `rig models`)")
        if old is None:
            opts = opts.seeded()  # a resumed run keeps its recorded seed (None in runs from before DEFAULT_SEED)
        spec, weights, chosen, cfg, skipped = _build(opts)
        if old is not None:
            _check_unchanged(opts, old, cfg)
            manifest, run_dir = old, opts.out / str(opts.resume)
            manifest.status = "running"
            manifest.allowed_hosts = list(dict.fromkeys([*manifest.allowed_hosts, *offline.allowed_entries()]))
        else:
            bundle_id = _bundle_id(opts)  # before the run folder exists: a bad bundle leaves nothing behind
            run_dir = _new_run_dir(opts, spec.name, chosen)
            lock = RunLock(run_dir)
            manifest = RunManifest.begin(
                run_dir.name,
                cfg,
                spec=RunSpec.model_validate(opts.model_dump(include=set(RunSpec.model_fields))),
                concurrency=opts.concurrency,
                order=opts.order,
                bundle_id=bundle_id,
                allowed_hosts=offline.allowed_entries(),
            )
        _write_first_manifest(opts, manifest, run_dir, lock)
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
        assert lock is not None
        lock.release()


def _open_resume(opts: BenchOptions) -> tuple[BenchOptions, RunManifest, RunLock]:
    """The run ``--resume`` names, locked, and ``opts`` completed from its record; a results database from a newer
    rig is refused before anything is written."""
    run_dir = opts.out / str(opts.resume)
    if not (run_dir / "manifest.json").exists():
        raise BenchError(f"--resume {opts.resume}: {run_dir / 'manifest.json'} not found")
    lock = RunLock(run_dir)
    try:
        old = RunFolder(run_dir).manifest
        Store(run_dir / "results.sqlite").close()
    except BaseException:
        lock.release()
        raise
    return resume_options(opts, old), old, lock


def _check_unchanged(opts: BenchOptions, old: RunManifest, cfg: RunConfig) -> None:
    if cfg.digest() != old.config_hash:
        changes = _diff(old.config.model_dump(mode="json"), cfg.model_dump(mode="json"))
        raise BenchError(
            f"--resume {opts.resume}: the configuration changed since the run started, refusing "
            "to mix results:\n  " + "\n  ".join(changes[:10])
        )


def _bundle_id(opts: BenchOptions) -> str | None:
    try:
        # Computed from the MANIFEST.json read now, never the id it claims.
        return bundle_id_for(opts.models_file or default_registry_path())
    except BundleError as e:
        raise BenchError(str(e)) from None


def _new_run_dir(opts: BenchOptions, model: str, chosen: list[tuple[Benchmark, list[Episode]]]) -> Path:
    # Claimed with one mkdir (a name taken by a concurrent run gets a suffix), so two runs never share a folder.
    try:
        return claim_folder(opts.out, new_run_id(model, "+".join(b.name for b, _ in chosen)))
    except OutputError as e:
        raise BenchError(str(e)) from None


def _write_first_manifest(opts: BenchOptions, manifest: RunManifest, run_dir: Path, lock: RunLock | None) -> None:
    """The manifest as the run starts. A configuration it cannot hold is refused before any episode runs, and a new
    run's folder is removed again."""
    try:
        manifest.write(run_dir)
    except OSError as e:
        if (full := storage_error(e, run_dir)) is not None:
            raise full from None
        raise BenchError(f"--out {opts.out}: cannot write {run_dir / 'manifest.json'} ({e.strerror})") from None
    except ValueError as e:
        if not opts.resume and lock is not None:
            lock.release()
            with contextlib.suppress(OSError):
                (run_dir / "run.lock").unlink()
                run_dir.rmdir()
        raise BenchError(str(e)) from None


def temperature_warnings(chosen: list[tuple[Benchmark, list[Episode]]], given: float | None) -> list[str]:
    """A benchmark that samples at its own temperature (MobilityBench at the paper's 0.1) is not reached by
    ``--temperature``: said at the start, so a run asked for at 0.7 is not read as one where it was not."""
    lines = []
    for bench, _ in chosen:
        own = bench.temperature(bench.opts, given)
        if given is not None and own is not None and own != given:
            lines.append(
                f"warning: --temperature {given:g} does not reach {bench.name}: its episodes sample at its option "
                f"temperature={own:g}; set -O {bench.name}.temperature={given:g} to change it"
            )
    return lines


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
    log_file = engine_log(run_dir)
    say(
        f"run {manifest.run_id}: {spec.name} on "
        + ", ".join(f"{b.name} ({len(e)} episodes)" for b, e in chosen)
        + f" x {opts.repeats} repeats"
    )
    for line in temperature_warnings(chosen, opts.temperature):
        say(line)
    turn = Turn(opts, spec, weights, manifest, run_dir, Store(run_dir / "results.sqlite"), create_engine, say, progress)
    energy = turn.start_telemetry()
    items = plan(chosen, opts.repeats, order=opts.order, seed=spec.sampling.seed)
    ctx = RunContext(sampling=spec.sampling, decode=opts.decode, tool_mode=opts.tool_mode)
    resume_hint = f"rig bench --resume {manifest.run_id} --out {opts.out}"
    raised = False
    try:
        # outside the event loop (before it starts) SIGTERM stops the run like Ctrl-C does; finishing is not stopped
        with sigterm_as_interrupt():
            finished = asyncio.run(turn.drive(items, ctx))
        manifest.status = "finished" if finished else "interrupted"
    except KeyboardInterrupt:
        manifest.status = "interrupted"
    except BaseException:
        raised = True
        manifest.status = "failed"  # a failed load or a broken run is not left "running"
        raise
    finally:
        unwritten = turn.finish(energy)
        if manifest.status == "interrupted":
            say(f"interrupted; resume with: {resume_hint}")
        elif manifest.status == "failed":
            say(f"run {manifest.run_id} failed; after fixing the cause, resume with: {resume_hint}")
        close_engine_log(log_file)
        if unwritten is not None and not raised:  # else the run's own error is the one to show
            raise unwritten
    return run_dir
