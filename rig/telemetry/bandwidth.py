"""The device's peak read bandwidth and matmul FLOP/s, measured by a short probe and cached per host.

MBU divides the bandwidth a run's decoding achieved by this peak. On the CPU the probe is a streaming read of a
buffer far larger than the last-level cache, with one thread and with one thread per usable core (each reducing its
own part), the best of a few passes of either (as STREAM reports its best). On a GPU it is a device-to-device copy
(bytes read plus bytes written), and NVML's maximum memory clock x bus width gives the data-sheet figure beside it.
Prefill is set against the probe's matmul FLOP/s (float32 BLAS on the CPU, bf16 on a GPU).

A probe records the conditions it ran under (`ProbeConditions`), because a probe that shares the memory with other
work reads low and every MBU set against it reads high. On the CPU: the CPU time other processes used on the usable
cores while the probe ran, as a share of those cores' time (`/proc/stat`'s busy time of those cores, steal included,
minus this process's own user and system time); over `CONTENDED_SHARE` the probe is marked as taken under load. On
a GPU: NVML's utilisation just before the probe (kernels of other processes; this one has none yet) and the memory
other processes hold; utilisation at or over `GPU_BUSY_PERCENT` marks it. The cache keeps the best peak seen
(`replaces`), and `peak_doubts` says why a cached peak may be low: marked, old (`OLD_AFTER_S`), taken by another rig
version, or with no conditions recorded.

The cache is a file another process or a crash can damage: it is read through the bounded readers (regular file
only, opened without blocking, size cap, nesting cap, finite numbers) and validated strictly (no string or bool for a
number, every figure positive and plausible); a damaged file or entry is ignored with the reason, naming the file.
"""

from __future__ import annotations

import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

import rig

PROBE_FORMAT = 1
# Others used more than a quarter of the usable cores' time while the probe ran: on a two-core host, one busy
# process on the other core for most of the probe. A streaming read's peak needs every core's memory traffic.
CONTENDED_SHARE = 0.25
GPU_BUSY_PERCENT = 10.0  # NVML utilisation just before a GPU probe: another process's kernels were running
OLD_AFTER_S = 30 * 86400  # a month: drivers, kernels and BIOS settings change
NEAR_PEAK = 0.9  # a run decoding at 90% of the peak or more: the peak may be low
CACHE_MAX_BYTES = 256 * 1024  # a few devices' probes are a few KiB
MAX_BYTES_PER_S = 1e15  # 1 PB/s: far above any memory (HBM3e is about 5e12); more is a damaged figure
MAX_FLOPS_PER_S = 1e18


class ProbeConditions(BaseModel):
    """What else the device was doing while a probe ran; ``contended`` marks a probe whose peak may read low."""

    rig_version: str
    wall_s: float = Field(ge=0, allow_inf_nan=False)
    cores: int = Field(ge=1)  # the usable cores whose time was counted
    load1_before: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # 1-minute load average
    load1_after: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    others_cpu_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # CPU seconds others used meanwhile
    others_share: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # of wall_s x cores
    cpu_reason: str | None = None  # why the CPU time is not known
    gpu_utilisation: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)  # NVML %, before
    gpu_other_processes: int | None = Field(default=None, ge=0)
    gpu_other_memory_bytes: int | None = Field(default=None, ge=0)
    gpu_reason: str | None = None
    contended: bool = False
    contention: str | None = None  # why it is marked, in words


class BandwidthProbe(BaseModel):
    """One device's measured peaks; what `rig doctor --bandwidth` caches and a run's manifest copies."""

    format_version: int = PROBE_FORMAT
    device: str  # "cpu" or "gpu:N"
    device_name: str
    host: str
    method: str  # how the bandwidth was measured, in words
    bytes_per_s: float = Field(gt=0, le=MAX_BYTES_PER_S, allow_inf_nan=False)  # peak read (CPU) or copy (GPU)
    buffer_bytes: int = Field(gt=0)
    threads: int | None = Field(default=None, gt=0)
    passes: int = Field(gt=0)
    # matmul FLOP/s measured (prefill's ceiling); None: not measured
    flops_per_s: float | None = Field(default=None, gt=0, le=MAX_FLOPS_PER_S, allow_inf_nan=False)
    flops_method: str | None = None
    # GPU: max memory clock x bus width (x2 for double data rate)
    nvml_bytes_per_s: float | None = Field(default=None, gt=0, le=MAX_BYTES_PER_S, allow_inf_nan=False)
    nvml_reason: str | None = None  # why there is no NVML figure
    measured_at: float = Field(ge=0, allow_inf_nan=False)  # seconds since the epoch (UTC)
    conditions: ProbeConditions | None = None  # None: probed before rig recorded them


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _busy_s(cpus: set[int]) -> float | None:
    """Seconds the given CPUs spent busy since boot (user, nice, system, irq, softirq and steal: steal is time the
    hypervisor gave to another guest, contention too); None without /proc/stat (not Linux)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    total, seen = 0, 0
    for line in lines:
        name, *fields = line.split()
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        v = [int(x) for x in fields[:8]] + [0] * (8 - len(fields[:8]))
        total += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
        seen += 1
    return total / os.sysconf("SC_CLK_TCK") if seen else None


def _load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _own_s() -> float:
    t = os.times()  # every thread of this process (the probe's readers and the BLAS pool)
    return t.user + t.system


class ConditionsWatch:
    """Started before a probe, read after it: the CPU time others used on this process's cores meanwhile."""

    def __init__(self) -> None:
        try:
            self.cpus = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.cpus = set(range(os.cpu_count() or 1))
        self.load1 = _load1()
        self.own = _own_s()
        self.busy = _busy_s(self.cpus)
        self.t0 = time.perf_counter()

    def finish(self, gpu: dict[str, Any] | None = None) -> ProbeConditions:
        """The conditions; ``gpu`` (NVML's figures, `gpu_state`) decides the mark of a GPU probe, the CPU time
        others used decides a CPU probe's."""
        wall = time.perf_counter() - self.t0
        busy, own = _busy_s(self.cpus), _own_s()
        c = ProbeConditions(
            rig_version=rig.__version__,
            wall_s=wall,
            cores=len(self.cpus),
            load1_before=self.load1,
            load1_after=_load1(),
        )
        if busy is None or self.busy is None or wall <= 0:
            c.cpu_reason = "no per-CPU times (/proc/stat) on this system"
        else:  # clock ticks round both counts: never below zero
            c.others_cpu_s = max(0.0, (busy - self.busy) - (own - self.own))
            c.others_share = c.others_cpu_s / (wall * len(self.cpus))
        if gpu is not None:
            c = c.model_copy(update=gpu)
            if c.gpu_utilisation is not None and c.gpu_utilisation >= GPU_BUSY_PERCENT:
                c.contended = True
                c.contention = (
                    f"the GPU was {c.gpu_utilisation:.0f}% busy just before the probe "
                    f"(a quiet probe needs under {GPU_BUSY_PERCENT:.0f}%)"
                )
        elif c.others_share is not None and c.others_share > CONTENDED_SHARE:
            c.contended = True
            c.contention = (
                f"other processes used {100 * c.others_share:.0f}% of {c.cores} core{'s' * (c.cores > 1)} during "
                f"the probe (a quiet probe allows {100 * CONTENDED_SHARE:.0f}%)"
            )
        return c


def gpu_state(handle: Any, nvml: Any) -> dict[str, Any]:
    """NVML's utilisation of the GPU and the processes holding memory on it, read before this process uses it (so
    every process listed is another's: a container's process ids need not match the host's)."""
    out: dict[str, Any] = {}
    why = []
    try:
        out["gpu_utilisation"] = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception as e:
        why.append(f"utilisation unavailable ({e})")
    try:
        procs = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        out["gpu_other_processes"] = len(procs)
        out["gpu_other_memory_bytes"] = sum(int(getattr(p, "usedGpuMemory", None) or 0) for p in procs)
    except Exception as e:
        why.append(f"processes unavailable ({e})")
    if why:
        out["gpu_reason"] = "NVML: " + "; ".join(why)
    return out


def stream_read(buffer_bytes: int, threads: int, passes: int) -> float:
    """Peak bytes/s of reading a buffer once per pass, ``threads`` threads each reducing its own slice (numpy
    releases the GIL inside a reduction)."""
    import numpy as np

    words = max(threads, buffer_bytes // 8)
    buf = np.ones(words, dtype=np.float64)  # written once, so every page is resident before timing
    parts = np.array_split(buf, threads)
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(passes):
            t = time.perf_counter()
            # max: one SIMD compare per element, the least arithmetic per byte of numpy's reductions
            list(pool.map(np.maximum.reduce, parts))
            best = min(best, time.perf_counter() - t)
    return buf.nbytes / best


def matmul_flops(n: int = 1024, passes: int = 3) -> float:
    import numpy as np

    a = np.ones((n, n), dtype=np.float32)
    b = np.ones((n, n), dtype=np.float32)
    a @ b  # warm the BLAS threads
    best = float("inf")
    for _ in range(passes):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def probe_cpu(buffer_bytes: int = 512 * 2**20, passes: int = 5) -> BandwidthProbe:
    """The best of one thread and one per usable core: on an oversubscribed host the threads wait on each other."""
    cores = usable_cores()
    watch = ConditionsWatch()
    tried = {n: stream_read(buffer_bytes, n, passes) for n in dict.fromkeys((1, cores))}
    threads = max(tried, key=lambda n: tried[n])
    flops = matmul_flops()
    return BandwidthProbe(
        device="cpu",
        device_name=cpu_name(),
        host=platform.node(),
        method=f"streaming read (numpy max reduction), best of {passes} passes with 1 and {cores} threads: "
        + ", ".join(f"{n} thread{'s' * (n > 1)} {bps / 1e9:.2f} GB/s" for n, bps in tried.items()),
        bytes_per_s=tried[threads],
        buffer_bytes=buffer_bytes,
        threads=threads,
        passes=passes,
        flops_per_s=flops,
        flops_method="float32 matmul 1024x1024 (numpy BLAS), best of 3",
        measured_at=time.time(),
        conditions=watch.finish(),
    )


def nvml_peak(handle: Any, nvml: Any) -> float:
    """Data-sheet read bandwidth: the maximum memory clock (MHz) x bus width (bits), double data rate."""
    mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)
    bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)
    return float(mhz) * 1e6 * 2 * float(bits) / 8


def _nvml_handle(gpu: int, nvml: Any) -> Any:
    from rig.telemetry.gpu import nvml_index_for

    nvml.nvmlInit()
    index, uuid = nvml_index_for(gpu)
    return nvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else nvml.nvmlDeviceGetHandleByIndex(index or 0)


def probe_gpu(gpu: int, buffer_bytes: int = 2**30, passes: int = 5, nvml: Any = None) -> BandwidthProbe:
    """A device-to-device copy with torch (bytes read + written per pass), bf16 matmul FLOP/s, and NVML's figure.
    NVML's utilisation and other processes are read first, before this process has a context on the GPU."""
    handle, why = None, None
    try:
        if nvml is None:
            import pynvml as nvml_mod

            nvml = nvml_mod
        handle = _nvml_handle(gpu, nvml)
        state = gpu_state(handle, nvml)
    except Exception as e:
        why = f"NVML unavailable: {e}"
        state = {"gpu_reason": why}
    watch = ConditionsWatch()
    import torch  # the GPU engines' dependency; a CPU-only install has no GPU probe

    dev = torch.device("cuda", gpu)
    src = torch.empty(buffer_bytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize(dev)
    best = float("inf")
    for _ in range(passes):
        t = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(dev)
        best = min(best, time.perf_counter() - t)
    n = 8192
    a = torch.ones((n, n), dtype=torch.bfloat16, device=dev)
    a @ a
    torch.cuda.synchronize(dev)
    mm = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        a @ a
        torch.cuda.synchronize(dev)
        mm = min(mm, time.perf_counter() - t)
    conditions = watch.finish(gpu=state)
    nvml_bps = None
    if handle is not None:
        try:
            nvml_bps = nvml_peak(handle, nvml)
        except Exception as e:
            why = f"NVML memory clock or bus width unavailable: {e}"
    return BandwidthProbe(
        device=f"gpu:{gpu}",
        device_name=torch.cuda.get_device_name(dev),
        host=platform.node(),
        method=f"device-to-device copy (torch), read + write bytes, best of {passes} passes",
        bytes_per_s=2 * buffer_bytes / best,
        buffer_bytes=buffer_bytes,
        passes=passes,
        flops_per_s=2 * n**3 / mm,
        flops_method=f"bf16 matmul {n}x{n} (torch), best of 3",
        nvml_bytes_per_s=nvml_bps,
        nvml_reason=why,
        measured_at=time.time(),
        conditions=conditions,
    )


def cache_path(host: str | None = None) -> Path:
    from rig.paths import cache_dir

    name = (host or platform.node() or "host").replace("/", "_")
    return cache_dir() / "bandwidth" / f"{name}.json"


def device_key(gpu: int | None) -> str:
    return "cpu" if gpu is None else f"gpu:{gpu}"


def _how(gpu: int | None) -> str:
    return f"run `rig doctor --bandwidth{'' if gpu is None else f' --gpu {gpu}'}` once on this host"


def read_cache(path: Path) -> tuple[dict[str, BandwidthProbe | str], str | None]:
    """The cache file's probes by device (a damaged entry: its reason, naming the field), or the whole file's
    problem naming it. Bounded: a FIFO, a device, a huge or deeply nested file is refused, never waited on."""
    from rig.decoding.safe import load_json
    from rig.inputs import InputError, read_text
    from rig.records import validation_where

    try:
        text = read_text(path, max_bytes=CACHE_MAX_BYTES)
    except InputError as e:
        return {}, str(e)
    data, err = load_json(text)
    if err:
        return {}, f"{path}: {err}"
    if not isinstance(data, dict):
        return {}, f"{path}: a JSON {type(data).__name__}, not an object of probes by device"
    out: dict[str, BandwidthProbe | str] = {}
    for key, entry in data.items():
        try:
            probe = BandwidthProbe.model_validate(entry, strict=True)  # no "5e9" or true where a number belongs
        except ValidationError as e:
            out[key] = f"{path}: {key}.{validation_where(e)}" if e.errors() else f"{path}: {key}: {e}"
            continue
        if probe.device != key:
            out[key] = f"{path}: {key}: the probe is of {probe.device}"
            continue
        out[key] = probe
    return out, None


def _present(path: Path) -> bool:
    """Whether there is anything under the name (a dangling link or an unreadable folder counts: the reader names
    what is wrong with it)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def cached_probe(gpu: int | None) -> tuple[BandwidthProbe | None, str | None]:
    """This host's cached probe of the device, or None and why (never probed, probed on other hardware, or a damaged
    cache: ignored, named, and measured again by the next `rig doctor --bandwidth`). Never raises."""
    path = cache_path()
    key = device_key(gpu)
    if not _present(path):
        return None, f"no bandwidth probe for this host: {_how(gpu)}"
    probes, err = read_cache(path)
    found = probes.get(key)
    if err or isinstance(found, str):
        return None, f"damaged bandwidth cache ignored ({err or found}): {_how(gpu)} to measure again"
    if found is None:
        return None, f"no bandwidth probe of {key} on this host: {_how(gpu)}"
    if gpu is None and found.device_name != cpu_name():  # a cache folder shared between machines
        return None, f"{path}: probed on {found.device_name}, not this CPU: {_how(gpu)}"
    return found, None


def save_probe(probe: BandwidthProbe) -> Path:
    """Put the probe in this host's cache file (one entry per device), written atomically; the file's damaged
    entries (or a damaged file) are dropped, the other devices' good probes kept. OSError when it cannot be written
    (the cache path is a directory, a read-only folder)."""
    from rig.records import write_atomic

    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    probes, _ = read_cache(path) if _present(path) else ({}, None)
    data = {k: v.model_dump(mode="json") for k, v in probes.items() if isinstance(v, BandwidthProbe)}
    data[probe.device] = probe.model_dump(mode="json")
    write_atomic(path, json.dumps(data, indent=2))
    return path


def utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def describe(probe: BandwidthProbe) -> str:
    """Where a peak comes from, in one line: the probe's time, rig version and conditions."""
    c = probe.conditions
    what = f"{'GPU copy' if probe.device.startswith('gpu') else 'CPU'} probe of {utc(probe.measured_at)}"
    if c is None:
        return f"{what}, conditions not recorded"
    what += f" by rig {c.rig_version}: {'under load' if c.contended else 'quiet'}"
    parts = []
    if c.gpu_utilisation is not None or c.gpu_other_processes is not None:
        if c.gpu_utilisation is not None:
            parts.append(f"GPU {c.gpu_utilisation:.0f}% busy before it")
        if c.gpu_other_processes is not None:
            mem = (c.gpu_other_memory_bytes or 0) / 1e9
            parts.append(f"{c.gpu_other_processes} other process{'es' * (c.gpu_other_processes != 1)} ({mem:.1f} GB)")
    elif c.gpu_reason:
        parts.append(c.gpu_reason)
    if c.others_share is not None:
        parts.append(f"others used {100 * c.others_share:.0f}% of {c.cores} core{'s' * (c.cores > 1)}")
    elif c.cpu_reason:
        parts.append(c.cpu_reason)
    if c.load1_before is not None and c.load1_after is not None:
        parts.append(f"load {c.load1_before:.2f} before, {c.load1_after:.2f} after")
    return f"{what} ({'; '.join(parts)})" if parts else what


def peak_doubts(probe: BandwidthProbe, at: float | None = None, version: str | None = None) -> list[str]:
    """Why the probe's peak may read low, as of ``at`` (a run's start; default now) for rig ``version`` (default
    this one): marked as taken under load, older than `OLD_AFTER_S`, taken by another rig, or conditions unknown."""
    at = time.time() if at is None else at
    version = version or rig.__version__
    out = []
    c = probe.conditions
    if c is None:
        out.append("its conditions were not recorded (probed by an earlier rig)")
    else:
        if c.contended:
            out.append(f"it was taken under load: {c.contention}")
        if c.rig_version != version:
            out.append(f"it was taken by rig {c.rig_version}, not {version}")
    if at - probe.measured_at > OLD_AFTER_S:
        out.append(f"it is {(at - probe.measured_at) / 86400:.0f} days old (over {OLD_AFTER_S // 86400})")
    return out


REFRESH_HINT = "run `rig doctor --bandwidth --refresh` on a quiet host"


def replaces(new: BandwidthProbe, old: BandwidthProbe) -> bool:
    """Whether a new probe takes the cached one's place without --refresh. A peak is the best seen: the higher
    bandwidth wins (its FLOP/s travel with it). A probe without doubts also replaces one with doubts (marked, old,
    another rig's) when it is within 5% of it, the noise between quiet probes: the doubt is then the only difference.
    """
    if new.bytes_per_s > old.bytes_per_s:
        return True
    return bool(peak_doubts(old)) and not peak_doubts(new) and new.bytes_per_s >= 0.95 * old.bytes_per_s


class CacheError(OSError):
    """The cache file cannot be written; str() names it."""


class ProbeOutcome(BaseModel):
    """What `rig doctor --bandwidth` did: the probe now in the cache, the one just measured, what was cached."""

    peak: BandwidthProbe  # the cache's probe after this call, what runs set their MBU against
    measured: BandwidthProbe
    previous: BandwidthProbe | None = None
    action: Literal["first", "replaced", "kept", "refreshed"]
    cache_problem: str | None = None  # a damaged cache that was ignored and is now rewritten


def probe(gpu: int | None, refresh: bool = False) -> ProbeOutcome:
    """Measure the device now; the cache keeps the best peak (`replaces`), or this one with ``refresh``."""
    previous, why = cached_probe(gpu)
    problem = why if why and why.startswith("damaged") else None
    new = probe_cpu() if gpu is None else probe_gpu(gpu)
    if previous is None:
        action: Literal["first", "replaced", "kept", "refreshed"] = "first"
    elif refresh:
        action = "refreshed"
    else:
        action = "replaced" if replaces(new, previous) else "kept"
    peak = previous if action == "kept" and previous is not None else new
    if action != "kept":
        try:
            save_probe(new)
        except OSError as e:
            raise CacheError(f"{cache_path()}: cannot write the bandwidth cache ({e.strerror or e})") from None
    return ProbeOutcome(peak=peak, measured=new, previous=previous, action=action, cache_problem=problem)
