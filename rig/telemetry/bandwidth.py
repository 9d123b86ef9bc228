"""The device's peak read bandwidth and matmul FLOP/s, measured by a short probe (`rig doctor --bandwidth`); the
record, its per-host cache and what reports say of it are `rig.telemetry.peak`'s.

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
other processes hold; utilisation at or over `GPU_BUSY_PERCENT` marks it. `probe` keeps the best peak seen in the
cache (`replaces`), or the new one with ``refresh``.
"""

from __future__ import annotations

import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

import rig
from rig.telemetry.peak import BandwidthProbe, ProbeConditions, cache_path, cached_probe, cpu_name, replaces, save_probe

# Others used more than a quarter of the usable cores' time while the probe ran: on a two-core host, one busy
# process on the other core for most of the probe. A streaming read's peak needs every core's memory traffic.
CONTENDED_SHARE = 0.25
GPU_BUSY_PERCENT = 10.0  # NVML utilisation just before a GPU probe: another process's kernels were running


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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
