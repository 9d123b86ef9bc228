"""One process's turn at a run (`rig bench`, or one attempt at a sweep cell): the engine driven over the plan
under signals, with the telemetry around it and the manifest's end state."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rig import plugins
from rig.benchmarks.base import RunContext
from rig.engines.base import Engine, EngineError
from rig.execution.runner import run_items
from rig.plugins import PluginError
from rig.registry import ModelSpec
from rig.runfolder.manifest import RunManifest, package_versions
from rig.runfolder.store import Store
from rig.telemetry.energy import EnergyMeter, RunEnergy, open_counter
from rig.telemetry.gpu import GpuSampler
from rig.telemetry.mbu import weights_profile
from rig.telemetry.peak import REFRESH_HINT, cached_probe, peak_doubts
from rig.weights_hash import weights_sha256

if TYPE_CHECKING:
    from rig.execution.bench import BenchOptions


def engine_log(run_dir: Path) -> logging.Handler:
    """Engines' native library logs ("rig.native") go to the run folder's engine.log, for debugging, off the
    terminal."""
    native = logging.getLogger("rig.native")
    log_file = _LogFile(run_dir / "engine.log", encoding="utf-8")
    log_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    native.addHandler(log_file)
    native.setLevel(logging.INFO)
    return log_file


def close_engine_log(log_file: logging.Handler) -> None:
    logging.getLogger("rig.native").removeHandler(log_file)
    log_file.close()


@dataclass
class Turn:
    """This process's turn at a run: what it runs, where, and the telemetry around its engine."""

    opts: BenchOptions
    spec: ModelSpec
    weights: str
    manifest: RunManifest
    run_dir: Path
    store: Store
    make_engine: Callable[..., Engine]  # rig.engines.create_engine
    say: Callable[[str], None]
    progress: Callable[[int, int], Any] | None
    sampler: GpuSampler = field(init=False)
    meter: EnergyMeter = field(init=False)

    def start_telemetry(self) -> RunEnergy:
        """GPU sampling, the energy counter (idle power before the model loads) and the host's cached probes; the
        energy record this turn adds its session to."""
        opts, manifest = self.opts, self.manifest
        self.sampler = GpuSampler(opts.gpu)
        self.sampler.start()
        self.meter = EnergyMeter(*open_counter(opts.gpu))
        energy = self.meter.record()
        if manifest.energy is not None and manifest.energy.source == energy.source:  # a resume adds a session
            energy.sessions = manifest.energy.sessions
        self.meter.measure_idle(opts.idle_window_s)
        manifest.bandwidth, manifest.bandwidth_reason = cached_probe(opts.gpu)
        if manifest.bandwidth is None and (manifest.bandwidth_reason or "").startswith("damaged"):
            self.say(f"warning: {manifest.bandwidth_reason}; this run's MBU is not measured")
        elif manifest.bandwidth is not None and (doubts := peak_doubts(manifest.bandwidth)):
            why = "; ".join(doubts)
            self.say(f"note: the bandwidth peak this run's MBU is set against is in doubt ({why}): {REFRESH_HINT}")
        manifest.weights_profile, manifest.weights_reason = weights_profile(self.weights)
        manifest.weights_sha256, manifest.weights_sha256_reason = weights_sha256(self.spec, self.weights)
        return energy

    def tick(self, total: int) -> Callable[[Any], None]:
        done = [len(self.store.done_keys())]
        if self.progress:
            self.progress(done[0], total)

        def on_done(_res: Any) -> None:
            done[0] += 1
            if self.progress:
                self.progress(done[0], total)

        return on_done

    async def drive(self, items: list[Any], ctx: RunContext) -> bool:
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
                name = signal.Signals(signum).name
                self.say(f"{name}: stopping; episodes in flight are abandoned and rerun on resume")
                main.cancel()
            else:
                self.say("still waiting for the engine call in flight to return")
            stopping.append(signum)

        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, RuntimeError):  # only the main thread can take signals
                loop.add_signal_handler(sig, on_signal, sig)
                handled.append(sig)
        engine = None
        try:
            with plugin_named(self.spec.engine):
                engine = self.make_engine(self.spec, self.weights, gpu=self.opts.gpu)
                self.note_placement(engine)
                await self.load(engine)
            on_done = self.tick(len(items))
            await run_items(
                items, engine, self.store, ctx, concurrency=self.opts.concurrency, on_done=on_done, meter=self.meter
            )
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
                self.manifest.engine_info = engine.describe()
                await _uncancellable(engine.close())
            for sig in handled:
                loop.remove_signal_handler(sig)

    def note_placement(self, engine: Engine) -> None:
        """Where rig cannot put the model on the device --gpu names, the run records and says which device its
        memory and energy readings are of, and why they may be another's: never silently."""
        note = engine.device_placement() if self.opts.gpu is not None else None
        if note is None:
            return
        self.sampler.summary.placement = note
        self.say(
            f"warning: --gpu {self.opts.gpu}: GPU memory and energy are read on {self.sampler.summary.watched()}, "
            f"which may not be the model's device: {note}"
        )

    async def load(self, engine: Engine) -> None:
        engine.meter = self.meter
        t = time.perf_counter()
        await engine.load()
        if self.manifest.load_time_s is None:
            self.manifest.load_time_s = time.perf_counter() - t
        self.sampler.mark_loaded()
        self.manifest.versions = package_versions() | engine.versions()
        self.manifest.write(self.run_dir)

    def finish(self, energy: RunEnergy) -> OSError | None:
        """The manifest's end state (telemetry, peak memory, end time) written; the error when it could not be (the
        manifest on disk stays the last one written whole: write_record is atomic)."""
        from rig.telemetry.process import peak_rss_bytes

        manifest = self.manifest
        gpu = self.sampler.stop()
        with contextlib.suppress(sqlite3.Error):  # telemetry only; the results are already committed
            self.store.write_gpu_samples(gpu.samples)
        gpu.samples = []  # kept in the store, not the manifest
        manifest.gpu_memory = gpu
        energy.sessions.append(self.meter.finish())
        energy.reason = self.meter.reason if self.meter.counter is None else None
        manifest.energy = energy
        manifest.peak_rss_bytes = max(manifest.peak_rss_bytes or 0, peak_rss_bytes())
        manifest.finished_at = time.time()
        try:
            manifest.write(self.run_dir)
        except OSError as e:
            return e
        finally:
            self.store.close()
        return None


@contextlib.contextmanager
def plugin_named(engine: str) -> Iterator[None]:
    """An engine plugin whose construction or load raises (anything but an `EngineError`, its way of saying what
    is wrong; `SystemExit` included) is a `PluginError` naming it and its distribution, not a traceback or a
    silent exit. rig's own engines' errors pass unchanged."""
    plugin = plugins.installed(plugins.ENGINE_GROUP, engine)
    try:
        yield
    except EngineError:
        raise
    except (Exception, SystemExit) as e:
        if plugin is None:
            raise
        raise PluginError(f"{plugin}: {type(e).__name__}: {e}") from e


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
