"""The bandwidth probe, its per-host cache, and NVML's data-sheet figure (a contract test: no GPU here)."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rig.telemetry import bandwidth
from rig.telemetry.bandwidth import BandwidthProbe, cache_path, cached_probe, nvml_peak, save_probe, stream_read


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


def probe_record(device: str = "cpu", name: str | None = None) -> BandwidthProbe:
    return BandwidthProbe(
        device=device,
        device_name=name or bandwidth.cpu_name(),
        host="h",
        method="test",
        bytes_per_s=5e9,
        buffer_bytes=1,
        passes=1,
        measured_at=0.0,
    )


def test_probe_is_cached_per_host_and_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    probe, why = cached_probe(None)
    assert probe is None and why == "no bandwidth probe for this host: run `rig doctor --bandwidth` once on this host"
    save_probe(probe_record())
    save_probe(probe_record("gpu:0", "NVIDIA H100"))
    assert cache_path().parent == tmp_path / "bandwidth"
    probe, why = cached_probe(None)
    assert why is None and probe is not None and probe.bytes_per_s == 5e9
    gpu, _ = cached_probe(0)
    assert gpu is not None and gpu.device_name == "NVIDIA H100"
    assert cached_probe(1) == (
        None,
        "no bandwidth probe of gpu:1 on this host: run `rig doctor --bandwidth --gpu 1` once on this host",
    )
    measured = []
    monkeypatch.setattr(bandwidth, "probe_cpu", lambda: measured.append(1) or probe_record())
    assert bandwidth.probe(None)[1] == "cached" and not measured
    assert bandwidth.probe(None, refresh=True)[1] == "measured" and measured == [1]


def test_a_probe_of_another_cpu_or_a_damaged_cache_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    save_probe(probe_record(name="Some Other CPU"))
    probe, why = cached_probe(None)
    assert probe is None and why is not None and "probed on Some Other CPU, not this CPU" in why
    cache_path().write_text(json.dumps({"cpu": {"device": "cpu"}}))
    probe, why = cached_probe(None)
    assert probe is None and why is not None and why.startswith(f"{cache_path()}: unreadable bandwidth probe")


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
