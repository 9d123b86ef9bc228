"""Energy per generation from the device's cumulative energy counter, net of an idle baseline.

Counters: NVML's ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules since the driver loaded, an unsigned 64-bit
count; Volta and later, else NVML_ERROR_NOT_SUPPORTED) on the ``--gpu`` device, or on a CPU run the RAPL package
domains under ``/sys/class/powercap`` (``energy_uj``, wrapping at ``max_energy_range_uj``; AMD's package energy
is exposed under the same ``intel-rapl`` zones). Without a readable counter every reading is "not measured" with
the reason, never 0.

The counter is read at each generation's start and end. The idle power, measured over a short window before the
model loads, is subtracted for the time attributed to a generation. Overlapping generations (concurrency > 1)
share the counter: the time between two consecutive reads is an interval, and each interval's energy goes to the
generations in flight then, by each one's share of the tokens it processed in the interval (its prompt tokens not
served from cache plus its completion tokens, spread evenly over its own duration). Every joule read during a
generation is attributed exactly once; energy drawn while no generation runs (tool calls, scoring) stays in the
run total only.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from rig.records import Attribution, EnergyReading, EpisodeResult, Generation

ENERGY_FORMAT = 1  # version of the energy records below; a reader treats a missing record as "not measured"
POWERCAP = Path("/sys/class/powercap")
NVML_WRAP_MJ = 2**64  # nvmlDeviceGetTotalEnergyConsumption fills an unsigned long long
# Package zones: intel-rapl:0, intel-rapl:1 (sub-zones such as intel-rapl:0:0 are cores / dram inside the package;
# intel-rapl-mmio:0 repeats the package through MMIO and would count it twice).
_PACKAGE_ZONE = re.compile(r"^intel-rapl:\d+$")


class CounterError(RuntimeError):
    """A counter that could be opened but not read; str() says why."""


class Counter(Protocol):
    source: str  # "nvml" or "rapl"
    detail: str  # device name or zones
    resolution_j: float  # one unit of the raw count

    def read(self) -> tuple[int, ...]: ...

    def delta_j(self, a: tuple[int, ...], b: tuple[int, ...]) -> float: ...


def wrapped_delta(a: int, b: int, modulus: int) -> int:
    """``b - a`` on a counter that wraps to 0 at ``modulus`` (at most one wrap between the two reads)."""
    return (b - a) % modulus


class NvmlCounter:
    source = "nvml"
    resolution_j = 1e-3

    def __init__(self, nvml: Any, handle: Any, name: str) -> None:
        self.nvml, self.handle, self.detail = nvml, handle, name

    def read(self) -> tuple[int, ...]:
        try:
            return (int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)),)
        except Exception as e:
            raise CounterError(f"NVML total energy counter: {e}") from None

    def delta_j(self, a: tuple[int, ...], b: tuple[int, ...]) -> float:
        return wrapped_delta(a[0], b[0], NVML_WRAP_MJ) * self.resolution_j


class RaplCounter:
    source = "rapl"
    resolution_j = 1e-6

    def __init__(self, zones: list[tuple[Path, int]]) -> None:
        self.zones = zones  # (energy_uj path, wrap modulus in µJ)
        self.detail = ", ".join(p.parent.name for p, _ in zones)

    def read(self) -> tuple[int, ...]:
        try:
            return tuple(int(p.read_text()) for p, _ in self.zones)
        except (OSError, ValueError) as e:
            raise CounterError(f"RAPL: {e}") from None

    def delta_j(self, a: tuple[int, ...], b: tuple[int, ...]) -> float:
        return sum(wrapped_delta(x, y, m) for x, y, (_, m) in zip(a, b, self.zones, strict=True)) * self.resolution_j


def open_nvml(gpu: int, nvml: Any = None) -> tuple[Counter | None, str | None]:
    """The ``--gpu`` device's energy counter, or None and why not (no library, no driver, a pre-Volta device)."""
    from rig.telemetry.gpu import nvml_index_for

    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return None, "nvidia-ml-py not installed (pip install 'rig[gpu]')"
        nvml = pynvml
    try:
        nvml.nvmlInit()
        index, uuid = nvml_index_for(gpu)
        if uuid:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
        elif index is not None:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        else:
            return None, f"--gpu {gpu} is not among CUDA_VISIBLE_DEVICES"
        name = nvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception as e:
        return None, f"NVML unavailable: {e}"
    counter = NvmlCounter(nvml, handle, name)
    try:
        counter.read()
    except CounterError as e:
        # NVML_ERROR_NOT_SUPPORTED before Volta; NO_PERMISSION on some virtualised devices.
        return None, f"{name}: no total energy counter ({e})"
    return counter, None


def open_rapl(root: Path = POWERCAP) -> tuple[Counter | None, str | None]:
    """The RAPL package zones' counters, or None and why not (no powercap, no package zone, not readable)."""
    if not root.is_dir():
        return None, f"{root} not present (no RAPL driver, or a virtual machine that hides it)"
    zones: list[tuple[Path, int]] = []
    for zone in sorted(root.iterdir()):
        if not _PACKAGE_ZONE.match(zone.name):
            continue
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        if not name.startswith("package"):
            continue  # psys is the whole platform, not the CPU package
        energy = zone / "energy_uj"
        try:
            int(energy.read_text())
            wrap = int((zone / "max_energy_range_uj").read_text())
        except PermissionError:
            return None, f"{energy}: not readable by this user (root only since Linux 5.10, CVE-2020-8694)"
        except (OSError, ValueError) as e:
            return None, f"{energy}: cannot be read ({e})"
        if wrap <= 0:
            return None, f"{zone / 'max_energy_range_uj'}: {wrap} is not a counter range"
        zones.append((energy, wrap))
    if not zones:
        return None, f"{root}: no RAPL package zone"
    return RaplCounter(zones), None


def open_counter(gpu: int | None, root: Path = POWERCAP) -> tuple[Counter | None, str | None]:
    return open_nvml(gpu) if gpu is not None else open_rapl(root)


class EnergySession(BaseModel):
    """One process's stretch of a run (a resumed run has one per resume): what was read and how."""

    idle_w: float | None = None  # mean power over the idle window before the model loaded
    idle_window_s: float | None = None
    gross_j: float | None = None  # counter delta from the idle window's end to the run's end
    attributed_gross_j: float | None = None  # of that, attributed to generations
    generations: int = 0


class RunEnergy(BaseModel):
    """The run's energy counter: source and resolution for the manifest; None fields were not measured."""

    format_version: int = ENERGY_FORMAT
    source: str | None = None  # "nvml" / "rapl"; None when not measured
    detail: str | None = None  # the device or RAPL zones read
    resolution_j: float | None = None  # one unit of the raw count (the hardware updates less often than that)
    reason: str | None = None  # why not measured
    attribution: str = "token-share for overlapping generations, exclusive otherwise"
    sessions: list[EnergySession] = Field(default_factory=list)

    @property
    def gross_j(self) -> float | None:
        vals = [s.gross_j for s in self.sessions if s.gross_j is not None]
        return sum(vals) if vals else None


@dataclass
class _Span:
    start: int  # index of the read at its start
    end: int | None = None
    tokens: int | None = None
    done: asyncio.Event | None = None


class EnergyMeter:
    """Reads one counter at generation boundaries and attributes the energy between reads."""

    def __init__(
        self,
        counter: Counter | None,
        reason: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.counter = counter  # None once it fails: later generations are not measured
        self._source = counter  # kept to compute the intervals read before a failure
        self.reason = reason or ("no energy counter" if counter is None else None)
        self.clock = clock
        self.idle_w: float | None = None
        self.session = EnergySession()
        self._reads: list[tuple[float, tuple[int, ...]]] = []
        self._active: list[frozenset[int]] = []  # spans in flight from read i to read i + 1
        self._spans: list[_Span] = []
        self._open: set[int] = set()
        self._run_start: tuple[float, tuple[int, ...]] | None = None

    def record(self) -> RunEnergy:
        c = self._source
        if c is None:
            return RunEnergy(reason=self.reason)
        return RunEnergy(source=c.source, detail=c.detail, resolution_j=c.resolution_j, reason=self.reason)

    def _read(self) -> tuple[float, tuple[int, ...]] | None:
        if self.counter is None:
            return None
        try:
            return self.clock(), self.counter.read()
        except CounterError as e:  # a counter that stops answering mid-run: the rest is not measured
            self.counter, self.reason = None, str(e)
            return None

    def measure_idle(self, seconds: float = 2.0, sleep: Callable[[float], None] = time.sleep) -> None:
        """Idle power over ``seconds`` before the model loads; then the run's own count starts."""
        a = self._read()
        if a is None:
            return
        sleep(seconds)
        b = self._read()
        if b is None or self._source is None:
            return
        dt = b[0] - a[0]
        if dt > 0:
            self.idle_w = self._source.delta_j(a[1], b[1]) / dt
            self.session.idle_w, self.session.idle_window_s = self.idle_w, dt
        self._run_start = b

    def _mark(self, r: tuple[float, tuple[int, ...]]) -> int:
        self._reads.append(r)
        self._active.append(frozenset(self._open))
        return len(self._reads) - 1

    def begin(self) -> int | None:
        """A generation starts: returns its span (None when there is no counter)."""
        r = self._read()
        if r is None:
            return None
        k = len(self._spans)
        self._open.add(k)
        self._spans.append(_Span(start=self._mark(r)))
        return k

    def end(self, span: int | None, gen: Generation | None) -> None:
        """The generation of ``span`` ended (``gen`` None when the call raised); its reading is filled by settle."""
        if span is None:
            if gen is not None:
                gen.energy = EnergyReading(reason=self.reason or "no energy counter")
            return
        s = self._spans[span]
        self._open.discard(span)
        r = self._read()
        s.end = s.start if r is None else self._mark(r)  # end == start: not measured, the reading says why
        if gen is not None:
            s.tokens = processed_tokens(gen)
            gen.energy = EnergyReading(span=span, reason="pending")
        if s.done is not None:
            s.done.set()

    def _overlapping(self, k: int) -> set[int]:
        s = self._spans[k]
        assert s.end is not None
        return {j for i in range(s.start, s.end) for j in self._active[i]}

    async def settle(self, res: EpisodeResult) -> None:
        """Fill the episode's generations' readings and its sum, once every generation that overlapped them has
        ended (their token counts are part of the split)."""
        for g in res.generations:
            k = g.energy.span if g.energy is not None else None
            if k is None or k >= len(self._spans) or self._spans[k].end is None:
                continue
            for j in self._overlapping(k):
                o = self._spans[j]
                if o.end is None:
                    o.done = o.done or asyncio.Event()
                    await o.done.wait()
        for g in res.generations:
            if g.energy is not None and g.energy.span is not None:
                g.energy = self.reading(g.energy.span)
        res.energy = episode_energy(res.generations, self.reason)

    def reading(self, k: int) -> EnergyReading:
        s = self._spans[k]
        if s.end is None or s.end == s.start or self._source is None:
            return EnergyReading(reason=self.reason or "the counter was not read at the generation's end")
        gross = idle = 0.0
        shared = timed = False
        for i in range(s.start, s.end):
            (t0, r0), (t1, r1) = self._reads[i], self._reads[i + 1]
            delta = self._source.delta_j(r0, r1)
            active = self._active[i]
            if t1 <= t0 and delta == 0:
                continue  # two reads at once (generations starting together): nothing to split
            if len(active) == 1:
                share = 1.0
            else:
                weights = [self._tokens_in(j, t0, t1) for j in active]
                if all(w is not None for w in weights) and sum(w or 0.0 for w in weights) > 0:
                    share, shared = (self._tokens_in(k, t0, t1) or 0.0) / sum(w or 0.0 for w in weights), True
                else:
                    share, timed = 1.0 / len(active), True
            gross += delta * share
            idle += (self.idle_w or 0.0) * (t1 - t0) * share
        attribution: Attribution = "time-share" if timed else "token-share" if shared else "exclusive"
        self.session.attributed_gross_j = (self.session.attributed_gross_j or 0.0) + gross
        self.session.generations += 1
        if self.idle_w is None:
            return EnergyReading(gross_j=gross, attribution=attribution, reason="no idle baseline was measured")
        return EnergyReading(joules=gross - idle, gross_j=gross, idle_j=idle, attribution=attribution)

    def _tokens_in(self, j: int, t0: float, t1: float) -> float | None:
        """Span j's tokens in [t0, t1], spread evenly over its own duration."""
        s = self._spans[j]
        if s.tokens is None or s.end is None:
            return None
        a, b = self._reads[s.start][0], self._reads[s.end][0]
        if b <= a:
            return float(s.tokens)
        return s.tokens * max(0.0, min(b, t1) - max(a, t0)) / (b - a)

    def finish(self) -> EnergySession:
        """The run's count from the idle window's end to now."""
        end = self._read()
        if end is not None and self._run_start is not None and self._source is not None:
            self.session.gross_j = self._source.delta_j(self._run_start[1], end[1])
        return self.session


def processed_tokens(gen: Generation) -> int | None:
    """Tokens a generation made the engine process: its prompt not served from cache, then its completion."""
    if gen.completion_tokens is None or gen.prompt_tokens is None:
        return None
    return max(0, gen.prompt_tokens - (gen.cached_prompt_tokens or 0)) + gen.completion_tokens


def episode_energy(gens: list[Generation], reason: str | None = None) -> EnergyReading:
    """An episode's energy: the sum of its generations'; not measured if any of them was not."""
    if not gens:
        return EnergyReading(reason="no generation")
    missing = [g.energy for g in gens if g.energy is None or g.energy.joules is None]
    if missing:
        why = next((e.reason for e in missing if e is not None and e.reason), None)
        return EnergyReading(reason=why or reason or "a generation was not measured")
    readings = [g.energy for g in gens if g.energy is not None]
    kinds = {e.attribution for e in readings}
    attribution: Attribution = (
        "time-share" if "time-share" in kinds else "token-share" if "token-share" in kinds else "exclusive"
    )
    return EnergyReading(
        joules=sum(e.joules or 0.0 for e in readings),
        gross_j=sum(e.gross_j or 0.0 for e in readings),
        idle_j=sum(e.idle_j or 0.0 for e in readings),
        attribution=attribution,
    )
