"""The device's peak read bandwidth and matmul FLOP/s, measured by a short probe and cached per host.

MBU divides the bandwidth a run's decoding achieved by this peak. On the CPU the probe is a streaming read of a
buffer far larger than the last-level cache, with one thread and with one thread per usable core (each reducing its
own part), the best of a few passes of either (as STREAM reports its best). On a GPU it is a device-to-device copy
(bytes read plus bytes written), and NVML's maximum memory clock x bus width gives the data-sheet figure beside it.
Prefill is set against the probe's matmul FLOP/s (float32 BLAS on the CPU, bf16 on a GPU).
"""

from __future__ import annotations

import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

PROBE_FORMAT = 1


class BandwidthProbe(BaseModel):
    """One device's measured peaks; what `rig doctor --bandwidth` caches and a run's manifest copies."""

    format_version: int = PROBE_FORMAT
    device: str  # "cpu" or "gpu:N"
    device_name: str
    host: str
    method: str  # how the bandwidth was measured, in words
    bytes_per_s: float  # peak read bandwidth (CPU) or copy bandwidth (GPU), measured
    buffer_bytes: int
    threads: int | None = None
    passes: int
    flops_per_s: float | None = None  # matmul FLOP/s measured (prefill's ceiling); None: not measured
    flops_method: str | None = None
    nvml_bytes_per_s: float | None = None  # GPU: max memory clock x bus width (x2 for double data rate)
    nvml_reason: str | None = None  # why there is no NVML figure
    measured_at: float


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
    tried = {n: stream_read(buffer_bytes, n, passes) for n in dict.fromkeys((1, cores))}
    threads = max(tried, key=lambda n: tried[n])
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
        flops_per_s=matmul_flops(),
        flops_method="float32 matmul 1024x1024 (numpy BLAS), best of 3",
        measured_at=time.time(),
    )


def nvml_peak(handle: Any, nvml: Any) -> float:
    """Data-sheet read bandwidth: the maximum memory clock (MHz) x bus width (bits), double data rate."""
    mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)
    bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)
    return float(mhz) * 1e6 * 2 * float(bits) / 8


def probe_gpu(gpu: int, buffer_bytes: int = 2**30, passes: int = 5, nvml: Any = None) -> BandwidthProbe:
    """A device-to-device copy with torch (bytes read + written per pass), bf16 matmul FLOP/s, and NVML's figure."""
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
    nvml_bps, why = None, None
    try:
        if nvml is None:
            import pynvml as nvml_mod

            nvml = nvml_mod
        from rig.telemetry.gpu import nvml_index_for

        nvml.nvmlInit()
        index, uuid = nvml_index_for(gpu)
        handle = nvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else nvml.nvmlDeviceGetHandleByIndex(index or 0)
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
    )


def cache_path(host: str | None = None) -> Path:
    from rig.maps.locate import cache_dir

    name = (host or platform.node() or "host").replace("/", "_")
    return cache_dir() / "bandwidth" / f"{name}.json"


def device_key(gpu: int | None) -> str:
    return "cpu" if gpu is None else f"gpu:{gpu}"


def cached_probe(gpu: int | None) -> tuple[BandwidthProbe | None, str | None]:
    """This host's cached probe of the device, or None and why (never probed, or probed on other hardware)."""
    path = cache_path()
    key = device_key(gpu)
    how = f"run `rig doctor --bandwidth{'' if gpu is None else f' --gpu {gpu}'}` once on this host"
    try:
        data = json.loads(path.read_text())
        probe = BandwidthProbe.model_validate(data[key])
    except FileNotFoundError:
        return None, f"no bandwidth probe for this host: {how}"
    except KeyError:
        return None, f"no bandwidth probe of {key} on this host: {how}"
    except (OSError, ValueError, ValidationError) as e:
        return None, f"{path}: unreadable bandwidth probe ({str(e).splitlines()[0]}): {how}"
    if gpu is None and probe.device_name != cpu_name():  # a cache folder shared between machines
        return None, f"{path}: probed on {probe.device_name}, not this CPU: {how}"
    return probe, None


def save_probe(probe: BandwidthProbe) -> Path:
    """Add the probe to this host's cache file (one entry per device), written atomically."""
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(path.read_text())
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[probe.device] = probe.model_dump(mode="json")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)
    return path


def probe(gpu: int | None, refresh: bool = False) -> tuple[BandwidthProbe, Literal["cached", "measured"]]:
    """The cached probe of the device, or a new one (cached for the next run)."""
    if not refresh:
        found, _ = cached_probe(gpu)
        if found is not None:
            return found, "cached"
    p = probe_cpu() if gpu is None else probe_gpu(gpu)
    save_probe(p)
    return p, "measured"
