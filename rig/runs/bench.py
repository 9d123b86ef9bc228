"""`rig bench` as a library call: config -> run directory with manifest, results and report."""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rig import offline
from rig.benchmarks import BENCHMARKS, get_benchmark_class
from rig.benchmarks.base import Benchmark, DataError, RunContext
from rig.engines import create_engine
from rig.records import Episode
from rig.registry import ModelSpec, load_registry, resolve_weights
from rig.runs.config import BenchmarkInfo, RunConfig
from rig.runs.manifest import RunManifest, git_revision, host_info, new_run_id, package_versions
from rig.runs.runner import plan, run_items
from rig.runs.store import Store
from rig.telemetry.gpu import GpuSampler


class BenchError(Exception):
    """A problem with the request (not with a model output); str() is shown to the user."""


class BenchOptions(BaseModel):
    model: str | None = None
    benchmark: str | None = None  # None: every registered benchmark whose data is available
    gpu: int | None = None
    limit: int | None = None
    repeats: int = 1
    data: Path | None = None
    out: Path = Path("runs")
    resume: str | None = None
    decode: str = "none"
    tool_mode: str = "prompt"
    options: dict[str, Any] = Field(default_factory=dict)  # benchmark options (format, task, ...)
    concurrency: int = 1
    order: str = "grouped"
    models_file: Path | None = None
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None


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
            raise BenchError(f"--option {key}: without --benchmark, name the benchmark it is for "
                             f"(e.g. -O callnavi.{key}=...; benchmarks: {', '.join(sorted(BENCHMARKS))})")
    return per


def _build(opts: BenchOptions) -> tuple[ModelSpec, str, list[tuple[Benchmark, list[Episode]]], RunConfig, list[str]]:
    reg = load_registry(opts.models_file)
    spec = reg.get(opts.model)
    overrides = (("temperature", opts.temperature), ("seed", opts.seed), ("max_tokens", opts.max_tokens))
    if any(v is not None for _, v in overrides):
        upd = {k: v for k, v in overrides if v is not None}
        spec = spec.model_copy(update={"sampling": spec.sampling.model_copy(update=upd)})
    weights = resolve_weights(spec, reg.path)
    names = [opts.benchmark] if opts.benchmark else sorted(BENCHMARKS)
    if opts.data is not None and len(names) > 1:
        raise BenchError("--data names one benchmark's data: pass --benchmark too")
    routed = _route_options(opts.options, names, single=opts.benchmark is not None)
    chosen, infos, skipped = [], [], []
    for name in names:
        bench_opts = routed[name]
        try:
            bench = get_benchmark_class(name)(opts.data, bench_opts)
            episodes = select(bench.episodes(), opts.limit, spec.sampling.seed)
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
        infos.append(BenchmarkInfo(name=bench.name, version=bench.version, data_path=str(bench.data),
                                   data_hash=bench.data_hash(), options=bench.opts.model_dump(mode="json"),
                                   episodes=len(episodes)))
    if not chosen:
        raise BenchError("no benchmark has data available:\n  " + "\n  ".join(skipped))
    s = spec.sampling
    cfg = RunConfig(model=spec, benchmarks=infos, repeats=opts.repeats, limit=opts.limit, decode=opts.decode,
                    tool_mode=opts.tool_mode, seed=s.seed, temperature=s.temperature, max_tokens=s.max_tokens,
                    gpu=opts.gpu)
    return spec, weights, chosen, cfg, skipped


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        return out
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def run_bench(opts: BenchOptions, progress: Callable[[int, int], Any] | None = None,
              on_event: Callable[[str], None] | None = None) -> Path:
    """Run (or resume) benchmarks on one model, in one run with one manifest; return the run directory."""
    offline.install()
    say = on_event or (lambda _m: None)
    if opts.resume:
        run_dir = opts.out / opts.resume
        if not (run_dir / "manifest.json").exists():
            raise BenchError(f"--resume {opts.resume}: {run_dir / 'manifest.json'} not found")
        old = RunManifest.read(run_dir)
        Store(run_dir / "results.sqlite").close()  # refuses a results database from a newer rig before any write
        if opts.model is None:  # resume exactly as recorded
            bs = old.config.benchmarks
            single = len(bs) == 1
            opts = opts.model_copy(update=dict(
                model=old.config.model.name, benchmark=bs[0].name if single else None,
                data=Path(bs[0].data_path) if single else None,
                options=bs[0].options if single else {f"{b.name}.{k}": v for b in bs for k, v in b.options.items()},
                limit=old.config.limit, repeats=old.config.repeats, decode=old.config.decode,
                tool_mode=old.config.tool_mode, gpu=old.config.gpu, temperature=old.config.temperature,
                seed=old.config.seed, max_tokens=old.config.max_tokens, order=old.order))
    if opts.model is None:
        raise BenchError("--model is required (see `rig models`)")
    spec, weights, chosen, cfg, skipped = _build(opts)
    for line in skipped:
        say(f"skipped {line}")
    if opts.resume:
        if cfg.digest() != old.config_hash:
            changes = _diff(old.config.model_dump(mode="json"), cfg.model_dump(mode="json"))
            raise BenchError(f"--resume {opts.resume}: the configuration changed since the run started, refusing to "
                             "mix results:\n  " + "\n  ".join(changes[:10]))
        manifest = old
        manifest.status = "running"
    else:
        run_id = new_run_id(spec.name, "+".join(b.name for b, _ in chosen))
        run_dir = opts.out / run_id
        run_dir.mkdir(parents=True, exist_ok=False)
        manifest = RunManifest(run_id=run_id, config_hash=cfg.digest(), config=cfg, git_revision=git_revision(),
                               host=host_info(), started_at=time.time(), concurrency=opts.concurrency,
                               order=opts.order)
    manifest.write(run_dir)
    # Engines' native library logs ("rig.native") are kept in the run folder for debugging, off the terminal.
    native = logging.getLogger("rig.native")
    log_file = logging.FileHandler(run_dir / "engine.log", encoding="utf-8")
    log_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    native.addHandler(log_file)
    native.setLevel(logging.INFO)
    say(f"run {manifest.run_id}: {spec.name} on " + ", ".join(f"{b.name} ({len(e)} episodes)" for b, e in chosen)
        + f" x {opts.repeats} repeats")
    store = Store(run_dir / "results.sqlite")
    sampler = GpuSampler(opts.gpu)
    sampler.start()
    engine = create_engine(spec, weights, gpu=opts.gpu)
    items = plan(chosen, opts.repeats, order=opts.order, seed=spec.sampling.seed)
    ctx = RunContext(sampling=spec.sampling, decode=opts.decode, tool_mode=opts.tool_mode)

    async def go() -> None:
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

        try:
            await run_items(items, engine, store, ctx, concurrency=opts.concurrency, on_done=tick)
        finally:
            manifest.engine_info = engine.describe()
            await engine.close()

    prev = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        asyncio.run(go())
        manifest.status = "finished"
    except KeyboardInterrupt:
        manifest.status = "interrupted"
        say(f"interrupted; resume with: rig bench --resume {manifest.run_id} --out {opts.out}")
    finally:
        signal.signal(signal.SIGTERM, prev)
        gpu = sampler.stop()
        store.write_gpu_samples(gpu.samples)
        gpu.samples = []  # kept in the store, not the manifest
        manifest.gpu_memory = gpu
        from rig.telemetry.process import peak_rss_bytes

        manifest.peak_rss_bytes = max(manifest.peak_rss_bytes or 0, peak_rss_bytes())
        manifest.finished_at = time.time()
        manifest.write(run_dir)
        store.close()
        native.removeHandler(log_file)
        log_file.close()
    return run_dir
