"""GPU memory sampler over NVML (package nvidia-ml-py, module ``pynvml``).

Device-level used memory (total - free) on the selected GPU, sampled in a thread: a baseline before the
model loads, a mark after load, then peak and mean during the run. Per-process accounting is not used:
inside containers NVML reports host PIDs, and vLLM / Ollama allocate from child processes anyway.
Without a driver everything reads "unavailable" and the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

from pydantic import BaseModel, Field


class GpuSample(BaseModel):
    t: float
    used_bytes: int


class GpuMemorySummary(BaseModel):
    available: bool
    reason: str | None = None  # why unavailable
    device_index: int | None = None
    device_uuid: str | None = None
    device_name: str | None = None
    driver: str | None = None
    total_bytes: int | None = None
    baseline_bytes: int | None = None
    after_load_bytes: int | None = None
    peak_bytes: int | None = None
    mean_bytes: float | None = None
    samples: list[GpuSample] = Field(default_factory=list)
    # Why these readings (and the energy read on the same device) may be another device's than the model's: its
    # engine does not put the model on the device --gpu names (an attached server, Ollama). None: rig placed it
    # there, or no --gpu was given; also in runs recorded before rig said so.
    placement: str | None = None

    def watched(self) -> str:
        """The device these readings are of, in words."""
        if not self.available:
            return f"no device ({self.reason or 'no reason recorded'})"
        return f"GPU {self.device_index} ({self.device_name}, {self.device_uuid})"

    @property
    def load_bytes(self) -> int | None:
        if self.after_load_bytes is None or self.baseline_bytes is None:
            return None
        return self.after_load_bytes - self.baseline_bytes

    @property
    def run_peak_over_baseline(self) -> int | None:
        if self.peak_bytes is None or self.baseline_bytes is None:
            return None
        return self.peak_bytes - self.baseline_bytes


def visible_devices(gpu: int, count: int = 1) -> list[str]:
    """The devices ``--gpu`` names, for every engine and the memory sampler alike: ``gpu`` is a position in
    ``CUDA_VISIBLE_DEVICES`` (so a sweep cell given GPU 3 as ``CUDA_VISIBLE_DEVICES=3 --gpu 0`` uses GPU 3), or the
    physical index when the variable is unset; ``count`` devices from there (tensor parallelism). A ValueError
    names the flag when the list is shorter."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(gpu + i) for i in range(count)]
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if gpu + count > len(entries):
        raise ValueError(
            f"--gpu {gpu}"
            + (f" with {count} devices" if count > 1 else "")
            + f": CUDA_VISIBLE_DEVICES={visible!r} lists {len(entries)} device(s); --gpu is a position in that list"
        )
    return entries[gpu : gpu + count]


def nvml_index_for(gpu: int) -> tuple[int | None, str | None]:
    """Map the user's --gpu ordinal (a CUDA ordinal under CUDA_VISIBLE_DEVICES) to an NVML index or UUID."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return gpu, None
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if gpu >= len(entries):
        return None, None
    entry = entries[gpu]
    if entry.startswith(("GPU-", "MIG-")):
        return None, entry
    if entry.isdigit():
        # Only an NVML index when CUDA enumerates in PCI order; the default FASTEST_FIRST may differ.
        return int(entry), None
    return None, None


class GpuSampler:
    """Background sampler; ``start`` takes the baseline, ``mark_loaded`` the post-load reading."""

    def __init__(self, gpu: int | None, interval_s: float = 0.2) -> None:
        self.gpu = gpu
        self.interval_s = interval_s
        self.summary = GpuMemorySummary(available=False, reason="not started")
        self._handle = None
        self._nvml = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sum = 0
        self._n = 0

    def _open(self) -> None:
        if self.gpu is None:
            self.summary = GpuMemorySummary(available=False, reason="no --gpu given (CPU run)")
            return
        try:
            import pynvml
        except ImportError:
            self.summary = GpuMemorySummary(
                available=False, reason="nvidia-ml-py not installed (pip install 'rig[gpu]')"
            )
            return
        try:
            pynvml.nvmlInit()
            index, uuid = nvml_index_for(self.gpu)
            if uuid:
                h = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            elif index is not None:
                h = pynvml.nvmlDeviceGetHandleByIndex(index)
            else:
                raise ValueError(f"--gpu {self.gpu} is not among CUDA_VISIBLE_DEVICES")
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            self.summary = GpuMemorySummary(
                available=True,
                device_index=pynvml.nvmlDeviceGetIndex(h),
                device_uuid=_s(pynvml.nvmlDeviceGetUUID(h)),
                device_name=_s(name),
                driver=_s(pynvml.nvmlSystemGetDriverVersion()),
                total_bytes=int(mem.total),
            )
            self._handle, self._nvml = h, pynvml
        except Exception as e:  # NVMLError_LibraryNotFound / DriverNotLoaded / NoPermission / bad index
            self.summary = GpuMemorySummary(available=False, reason=f"NVML unavailable: {e}")

    def _read(self) -> int | None:
        if self._handle is None:
            return None
        try:
            mem = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
            return int(mem.total - mem.free)
        except Exception:
            return None

    def start(self) -> None:
        self._open()
        used = self._read()
        if used is None:
            return
        self.summary.baseline_bytes = used
        self.summary.peak_bytes = used
        self._thread = threading.Thread(target=self._loop, name="rig-gpu-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        used = self._read()
        if used is None:
            return
        with self._lock:
            s = self.summary
            s.samples.append(GpuSample(t=time.time(), used_bytes=used))
            s.peak_bytes = max(s.peak_bytes or used, used)
            self._sum += used
            self._n += 1
            s.mean_bytes = self._sum / self._n

    def mark_loaded(self) -> None:
        used = self._read()
        if used is not None:
            self.summary.after_load_bytes = used
            self.sample()

    def stop(self) -> GpuMemorySummary:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        self.sample()
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
        return self.summary


def _s(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
