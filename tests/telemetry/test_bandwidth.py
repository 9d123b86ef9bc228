"""The bandwidth probe, its per-host cache, and NVML's data-sheet figure (a contract test: no GPU here)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import rig
from rig.telemetry import bandwidth, peak
from rig.telemetry.bandwidth import (
    CONTENDED_SHARE,
    CacheError,
    ConditionsWatch,
    gpu_state,
    nvml_peak,
    probe,
    stream_read,
)
from rig.telemetry.peak import cache_path, cached_probe, describe, peak_doubts, save_probe
from tests.telemetry.test_peak import probe_record


def test_probe_read_is_within_20_percent_of_a_plain_numpy_read() -> None:
    """Interleaved rounds (the host is shared), medians compared: the probe measures memory, not its own overhead.
    One thread, as the plain read has (all cores on a large host read faster than one numpy thread can)."""
    size = 256 * 2**20
    plain = np.ones(size // 8)
    probe, numpy_read = [], []
    for _ in range(5):
        probe.append(stream_read(size, 1, passes=3))
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            plain.max()
            best = min(best, time.perf_counter() - t)
        numpy_read.append(plain.nbytes / best)
    ratio = statistics.median(probe) / statistics.median(numpy_read)
    assert 0.8 <= ratio <= 1.2, ratio


@pytest.mark.contract
def test_nvml_data_sheet_bandwidth_is_memory_clock_times_bus_width() -> None:
    """nvmlDeviceGetMaxClockInfo(NVML_CLOCK_MEM) is MHz, nvmlDeviceGetMemoryBusWidth bits; the memory is double
    data rate. An H100 SXM (2619 MHz, 5120 bits) gives its data sheet's 3.35 TB/s."""
    calls = []

    def clock(handle: object, kind: int) -> int:
        calls.append(kind)
        return 2619

    nvml = SimpleNamespace(
        NVML_CLOCK_MEM=2, nvmlDeviceGetMaxClockInfo=clock, nvmlDeviceGetMemoryBusWidth=lambda h: 5120
    )
    assert nvml_peak("h", nvml) == pytest.approx(3.352e12, rel=1e-3)
    assert calls == [2]


def test_a_probe_while_busy_processes_run_on_the_cores_is_marked_as_under_load(no_hang: None) -> None:
    """Real busy loops, one per usable core, compete with the probe: the CPU time they used shows in its record."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(bandwidth.usable_cores())]
    try:
        time.sleep(0.5)  # started and spinning
        p = bandwidth.probe_cpu(buffer_bytes=64 * 2**20, passes=3)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    c = p.conditions
    assert c is not None and c.rig_version == rig.__version__ and c.cores == bandwidth.usable_cores()
    assert c.others_share is not None and c.others_share > CONTENDED_SHARE, c
    assert c.others_cpu_s is not None and c.others_cpu_s > CONTENDED_SHARE * c.wall_s * c.cores
    assert c.contended and c.contention is not None and "other processes used" in c.contention
    assert c.load1_before is not None and c.load1_after is not None
    assert "under load" in describe(p) and peak_doubts(p)[0].startswith("it was taken under load: other processes")


def test_others_cpu_time_is_the_cores_busy_time_less_this_process_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/stat counts every process on the cores, this one too: only the rest is contention; the mark is set
    above CONTENDED_SHARE of the cores' time."""
    for others, marked in ((0.4, False), (0.6, True)):  # seconds others used, over 1 s of 2 cores
        busy, own = iter([100.0, 100.0 + 1.5 + others]), iter([10.0, 11.5])  # the probe's own 1.5 s
        monkeypatch.setattr(bandwidth, "_busy_s", lambda cpus, busy=busy: next(busy))
        monkeypatch.setattr(bandwidth, "_own_s", lambda own=own: next(own))
        w = ConditionsWatch()
        w.cpus, w.t0 = {0, 1}, time.perf_counter() - 1.0
        c = w.finish()
        assert c.others_cpu_s == pytest.approx(others)
        assert c.others_share == pytest.approx(others / 2, rel=0.02)
        assert c.contended is marked


def test_proc_stat_busy_time_counts_this_process_work() -> None:
    cpus = os.sched_getaffinity(0)
    busy0, own0 = bandwidth._busy_s(cpus), bandwidth._own_s()
    end = time.perf_counter() + 0.3
    while time.perf_counter() < end:
        pass
    busy1, own1 = bandwidth._busy_s(cpus), bandwidth._own_s()
    assert busy0 is not None and busy1 is not None
    assert busy1 - busy0 >= 0.8 * (own1 - own0) > 0  # clock ticks (10 ms) round both


def test_a_quiet_probe_replaces_a_lower_cached_peak_without_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    save_probe(probe_record(bps=20.58e9, contended=True))
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=31.42e9))
    o = probe(None)
    assert (o.action, o.previous and o.previous.bytes_per_s, o.peak.bytes_per_s) == ("replaced", 20.58e9, 31.42e9)
    cached, _ = cached_probe(None)
    assert cached is not None and cached.bytes_per_s == 31.42e9 and peak_doubts(cached) == []


def test_a_lower_probe_does_not_replace_a_higher_one_unless_refreshed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    save_probe(probe_record(bps=31e9))
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=20e9, contended=True))
    o = probe(None)
    assert (o.action, o.peak.bytes_per_s, o.measured.bytes_per_s) == ("kept", 31e9, 20e9)
    cached, _ = cached_probe(None)
    assert cached is not None and cached.bytes_per_s == 31e9
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=29e9))  # quiet, but 6% lower: kept too
    assert probe(None).action == "kept"
    assert probe(None, refresh=True).action == "refreshed"
    cached, _ = cached_probe(None)
    assert cached is not None and cached.bytes_per_s == 29e9


def test_a_quiet_probe_within_noise_replaces_a_doubtful_higher_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    for doubtful in (
        probe_record(bps=30e9, contended=True),
        probe_record(bps=30e9, at=time.time() - 40 * 86400),
        probe_record(bps=30e9, conditions=False),
    ):
        save_probe(doubtful)
        monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=24e9))  # 20% lower: kept
        assert probe(None).action == "kept"
        monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=29e9))  # within 5%: replaces
        assert probe(None).action == "replaced"


@pytest.mark.contract
def test_a_gpu_busy_before_the_probe_marks_it() -> None:
    """NVML's utilisation rates (.gpu, percent) and compute processes (.usedGpuMemory, bytes; None when the driver
    does not say) are read before the probe; 10% or more marks it."""
    procs = [SimpleNamespace(pid=7, usedGpuMemory=2 * 10**9), SimpleNamespace(pid=8, usedGpuMemory=None)]
    for util, marked in ((3, False), (40, True)):
        nvml = SimpleNamespace(
            nvmlDeviceGetUtilizationRates=lambda h, util=util: SimpleNamespace(gpu=util, memory=1),
            nvmlDeviceGetComputeRunningProcesses=lambda h: procs,
        )
        state = gpu_state("h", nvml)
        assert state == {"gpu_utilisation": float(util), "gpu_other_processes": 2, "gpu_other_memory_bytes": 2 * 10**9}
        c = ConditionsWatch().finish(gpu=state)
        assert c.contended is marked
        if marked:
            assert c.contention == "the GPU was 40% busy just before the probe (a quiet probe needs under 10%)"
    broken = SimpleNamespace()  # an old driver without these calls
    state = gpu_state("h", broken)
    assert state["gpu_reason"].startswith("NVML: utilisation unavailable (")
    assert not ConditionsWatch().finish(gpu=state).contended


def _nested(p: Path) -> None:
    p.write_text("[" * 100_000 + "]" * 100_000)


def _record(**change: object) -> Callable[[Path], None]:
    def write(p: Path) -> None:
        entry = probe_record().model_dump(mode="json")
        entry.update(change)
        text = json.dumps({"cpu": entry})
        p.write_text(text.replace('"NAN"', "NaN"))

    return write


DAMAGED: list[tuple[str, Callable[[Path], None], str]] = [
    ("deeply nested", _nested, "invalid JSON: "),
    ("list-shaped", lambda p: p.write_text("[1, 2]"), "a JSON list, not an object of probes by device"),
    ("NaN", _record(bytes_per_s="NAN"), "invalid JSON: NaN is not JSON"),
    ("negative", _record(bytes_per_s=-2.5e9), "cpu.bytes_per_s: Input should be greater than 0"),
    ("implausible", _record(bytes_per_s=1e300), "cpu.bytes_per_s: Input should be less than or equal to"),
    ("zero FLOP/s", _record(flops_per_s=0), "cpu.flops_per_s: Input should be greater than 0"),
    ("a string number", _record(bytes_per_s="5e9"), "cpu.bytes_per_s: Input should be a valid number"),
    ("a bool for a count", _record(passes=True), "cpu.passes: Input should be a valid integer"),
    ("another device's entry", _record(device="gpu:0"), "cpu: the probe is of gpu:0"),
    ("huge", lambda p: p.write_text(" " * (peak.CACHE_MAX_BYTES + 1) + "{}"), "larger than 262,144 bytes"),
    ("FIFO", lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a file"),
    ("/dev/zero", lambda p: p.symlink_to("/dev/zero"), "is a character device, not a file"),
    ("not UTF-8", lambda p: p.write_bytes(b"\xff\xfe{}"), "not UTF-8 text"),
]


@pytest.mark.parametrize(("shape", "make", "words"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_cache_is_ignored_naming_the_file_and_measured_again(
    shape: str,
    make: Callable[[Path], None],
    words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_hang: None,
) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    cache_path().parent.mkdir(parents=True)
    make(cache_path())
    found, why = cached_probe(None)
    assert found is None and why is not None
    assert why.startswith(f"damaged bandwidth cache ignored ({cache_path()}: ") and words in why, why
    assert why.endswith("run `rig doctor --bandwidth` once on this host to measure again")
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record(bps=7e9))
    o = probe(None)  # what `rig doctor --bandwidth` does next: measured, and the file rewritten whole
    assert o.action == "first" and o.cache_problem == why
    found, why = cached_probe(None)
    assert why is None and found is not None and found.bytes_per_s == 7e9


def test_a_damaged_entry_is_dropped_and_the_other_devices_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    save_probe(probe_record("gpu:0", "NVIDIA H100"))
    data = json.loads(cache_path().read_text())
    data["cpu"] = {"device": "cpu", "bytes_per_s": -1}
    cache_path().write_text(json.dumps(data))
    assert cached_probe(0)[0] is not None  # one bad entry does not hide the others
    save_probe(probe_record())
    data = json.loads(cache_path().read_text())
    assert set(data) == {"cpu", "gpu:0"} and data["cpu"]["bytes_per_s"] == 5e9


def test_a_cache_that_cannot_be_written_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    cache_path().mkdir(parents=True)  # a directory where the file belongs
    found, why = cached_probe(None)
    assert found is None and why is not None and "is a directory, not a file" in why
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: probe_record())
    with pytest.raises(CacheError, match=f"^{cache_path()}: cannot write the bandwidth cache"):
        probe(None)


class _Tensor:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def copy_(self, other: object) -> None:
        self.log.append("copy")

    def __matmul__(self, other: object) -> _Tensor:
        self.log.append("matmul")
        time.sleep(0.01)  # an 8192^3 product at 110 TFLOP/s: a plausible figure, as a GPU's would be
        return self


def _fake_torch(log: list[str]) -> SimpleNamespace:
    """What probe_gpu calls of torch, each call logged: the order shows NVML was read before the GPU was used."""
    return SimpleNamespace(
        uint8="u8",
        bfloat16="bf16",
        device=lambda kind, index: (kind, index),
        empty=lambda n, dtype, device: log.append("alloc") or _Tensor(log),
        empty_like=lambda t: _Tensor(log),
        ones=lambda shape, dtype, device: _Tensor(log),
        cuda=SimpleNamespace(synchronize=lambda dev: None, get_device_name=lambda dev: "NVIDIA H100"),
    )


@pytest.mark.contract
@pytest.mark.parametrize(("util", "marked"), [(0, False), (85, True)])
def test_a_gpu_probe_reads_nvml_before_using_the_gpu_and_records_it(
    util: int, marked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(log))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def utilisation(handle: object) -> SimpleNamespace:
        log.append("nvml utilisation")
        return SimpleNamespace(gpu=util, memory=0)

    nvml = SimpleNamespace(
        NVML_CLOCK_MEM=2,
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle {i}",
        nvmlDeviceGetUtilizationRates=utilisation,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=9, usedGpuMemory=3 * 10**9)],
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 2619,
        nvmlDeviceGetMemoryBusWidth=lambda h: 5120,
    )
    p = bandwidth.probe_gpu(0, buffer_bytes=1024, passes=2, nvml=nvml)
    assert log.index("nvml utilisation") < log.index("alloc")  # another process's kernels, not this probe's
    c = p.conditions
    assert c is not None and c.gpu_utilisation == util and c.gpu_other_processes == 1
    assert c.gpu_other_memory_bytes == 3 * 10**9 and c.contended is marked
    assert p.nvml_bytes_per_s == pytest.approx(3.352e12, rel=1e-3) and p.nvml_reason is None
    assert p.device == "gpu:0" and p.bytes_per_s > 0 and p.flops_per_s
    words = describe(p)
    assert f"GPU {util}% busy before it; 1 other process (3.0 GB)" in words
    assert ("under load" in words) is marked


@pytest.mark.contract
def test_a_gpu_probe_without_nvml_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch([]))

    def no_nvml() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    p = bandwidth.probe_gpu(0, buffer_bytes=1024, passes=1, nvml=SimpleNamespace(nvmlInit=no_nvml))
    assert p.nvml_bytes_per_s is None and p.nvml_reason == "NVML unavailable: NVML Shared Library Not Found"
    assert p.conditions is not None and p.conditions.gpu_reason == p.nvml_reason and not p.conditions.contended
