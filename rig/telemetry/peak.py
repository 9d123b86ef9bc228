"""A device's measured peak as rig keeps it: the `BandwidthProbe` record and the `ProbeConditions` it was taken
under, this host's cache of them (one file per host in the rig cache, an entry per device), and what every report
says beside an MBU: where the peak comes from (`describe`) and why it may read low (`peak_doubts`: marked as taken
under load, old (`OLD_AFTER_S`), taken by another rig version, or with no conditions recorded). The cache keeps the
best peak seen (`replaces`). Measuring is `rig.telemetry.bandwidth`'s.

The cache is a file another process or a crash can damage: it is read through the bounded readers (regular file
only, opened without blocking, size cap, nesting cap, finite numbers) and validated strictly (no string or bool for a
number, every figure positive and plausible, a time a calendar holds and not past tomorrow); a damaged file or entry
is ignored with the reason, naming the file.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

import rig

PROBE_FORMAT = 1
OLD_AFTER_S = 30 * 86400  # a month: drivers, kernels and BIOS settings change
NEAR_PEAK = 0.9  # a run decoding at 90% of the peak or more: the peak may be low
CACHE_MAX_BYTES = 256 * 1024  # a few devices' probes are a few KiB
MAX_BYTES_PER_S = 1e15  # 1 PB/s: far above any memory (HBM3e is about 5e12); more is a damaged figure
MAX_FLOPS_PER_S = 1e18
LAST_TIME = 253402300799.0  # 9999-12-31 23:59:59 UTC: the last second a calendar date can show
FUTURE_SLACK_S = 86400.0  # a clock a day ahead is a wrong clock, not a probe from the future


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
    measured_at: float = Field(ge=0, le=LAST_TIME, allow_inf_nan=False)  # seconds since the epoch (UTC)
    conditions: ProbeConditions | None = None  # None: probed before rig recorded them


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
        if probe.measured_at > time.time() + FUTURE_SLACK_S:  # it would read as never old, and outlive any refresh
            out[key] = f"{path}: {key}.measured_at: {utc(probe.measured_at)} is in the future"
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
