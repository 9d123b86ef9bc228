"""Energy counters and their attribution.

NVML is tested as a contract against its documented semantics (no GPU is needed): the total energy counter
(``nvmlDeviceGetTotalEnergyConsumption``) is millijoules since the driver was last reloaded, an unsigned long long,
on Volta and later; older devices raise NVML_ERROR_NOT_SUPPORTED. RAPL is tested on a fake sysfs tree laid out as
the powercap driver lays it out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rig.engines.base import Capabilities, Engine, Reply
from rig.records import ChatRequest, EpisodeResult, Generation, Message
from rig.telemetry.energy import NVML_WRAP_MJ, EnergyMeter, open_nvml, open_rapl, processed_tokens
from tests.fakes import fake_spec


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # pynvml's own class name
    def __str__(self) -> str:
        return "Not Supported"


def fake_nvml(readings: list[int] | None) -> Any:
    """pynvml's functions as the library documents them; ``readings`` None: a pre-Volta device."""
    values = iter(readings or [])

    def energy(handle: object) -> int:
        if readings is None:
            raise NVMLError_NotSupported()
        return next(values)

    return SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}",
        nvmlDeviceGetHandleByUUID=lambda u: f"handle-{u}",
        nvmlDeviceGetName=lambda h: b"NVIDIA H100 80GB HBM3",
        nvmlDeviceGetTotalEnergyConsumption=energy,
    )


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def gen(prompt: int, completion: int, cached: int = 0) -> Generation:
    return Generation(request_hash="h", prompt_tokens=prompt, completion_tokens=completion, cached_prompt_tokens=cached)


@pytest.mark.contract
def test_nvml_counter_wraps_around_at_64_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # the probe read at open, then: idle start, idle end, generation start, generation end
    near = NVML_WRAP_MJ - 1_000
    counter, why = open_nvml(0, fake_nvml([near, near, near + 400, near + 900, 4_100]))
    assert why is None and counter is not None and counter.source == "nvml"
    clock = Clock()
    meter = EnergyMeter(counter, clock=clock)
    meter.measure_idle(2.0, sleep=lambda s: setattr(clock, "t", clock.t + s))  # 0.4 J over 2 s: 0.2 W
    assert meter.idle_w == pytest.approx(0.2)
    span = meter.begin()
    clock.t += 1.0
    g = gen(10, 5)
    meter.end(span, g)
    res = EpisodeResult(benchmark="b", episode_id="e", repeat=0, generations=[g])
    asyncio.run(meter.settle(res))
    # 100 mJ before the wrap and 4,100 after it: 4.2 J, not a negative or 2^64-sized value
    assert g.energy is not None and g.energy.gross_j == pytest.approx(4.2)
    assert g.energy.joules == pytest.approx(4.2 - 0.2)
    assert res.energy is not None and res.energy.joules == pytest.approx(4.0)


@pytest.mark.contract
def test_nvml_unsupported_device_is_not_measured_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    counter, why = open_nvml(0, fake_nvml(None))
    assert counter is None
    assert why == "NVIDIA H100 80GB HBM3: no total energy counter (NVML total energy counter: Not Supported)"
    meter = EnergyMeter(counter, why)
    meter.measure_idle(2.0, sleep=lambda s: None)
    g = gen(10, 5)
    meter.end(meter.begin(), g)
    res = EpisodeResult(benchmark="b", episode_id="e", repeat=0, generations=[g])
    asyncio.run(meter.settle(res))
    assert g.energy is not None and g.energy.joules is None and g.energy.reason == why
    assert res.energy is not None and res.energy.joules is None and res.energy.reason == why
    record = meter.record()
    assert record.source is None and record.reason == why
    assert meter.finish().gross_j is None


@pytest.mark.contract
def test_nvml_idle_baseline_is_subtracted_for_the_generation_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # 60 W idle over 2 s (120 J), then a 3 s generation drawing 300 J: 300 - 3 x 60 = 120 J
    counter, _ = open_nvml(0, fake_nvml([0, 1_000_000, 1_120_000, 1_200_000, 1_500_000, 1_700_000]))
    clock = Clock()
    meter = EnergyMeter(counter, clock=clock)
    meter.measure_idle(2.0, sleep=lambda s: setattr(clock, "t", clock.t + s))
    clock.t += 1.0
    span = meter.begin()
    clock.t += 3.0
    g = gen(100, 20)
    meter.end(span, g)
    res = EpisodeResult(benchmark="b", episode_id="e", repeat=0, generations=[g])
    asyncio.run(meter.settle(res))
    assert g.energy is not None
    assert (g.energy.gross_j, g.energy.idle_j, g.energy.joules) == pytest.approx((300.0, 180.0, 120.0))
    assert g.energy.attribution == "exclusive"
    assert meter.finish().gross_j == pytest.approx(1_700_000 / 1000 - 1_120)  # from the idle window's end


@pytest.mark.contract
def test_nvml_overlapping_generations_split_by_tokens() -> None:
    """A runs 0-4 s with 30 tokens, B 2-6 s with 10; 100 W drawn, 20 W idle. In 2-4 s A processed 15 tokens and B 5,
    so A gets 3/4 of that interval: A 200 + 150 = 350 J gross, B 50 + 200 = 250 J; every joule once."""
    clock = Clock()
    counter, _ = open_nvml(0, fake_nvml([0, 0, 40_000, 40_000, 240_000, 440_000, 640_000]))
    meter = EnergyMeter(counter, clock=clock)
    meter.measure_idle(2.0, sleep=lambda s: setattr(clock, "t", clock.t + s))
    assert meter.idle_w == pytest.approx(20.0)
    clock.t = 0.0
    a = meter.begin()
    clock.t = 2.0
    b = meter.begin()
    clock.t = 4.0
    ga, gb = gen(20, 10), gen(8, 4, cached=2)
    assert (processed_tokens(ga), processed_tokens(gb)) == (30, 10)
    meter.end(a, ga)
    ra = EpisodeResult(benchmark="x", episode_id="a", repeat=0, generations=[ga])
    rb = EpisodeResult(benchmark="x", episode_id="b", repeat=0, generations=[gb])

    async def go() -> None:
        settling = asyncio.ensure_future(meter.settle(ra))
        await asyncio.sleep(0.01)
        assert not settling.done()  # A's share depends on B's tokens: it waits for B to end
        clock.t = 6.0
        meter.end(b, gb)
        await settling
        await meter.settle(rb)

    asyncio.run(go())
    assert ga.energy is not None and gb.energy is not None
    assert (ga.energy.gross_j, ga.energy.idle_j, ga.energy.joules) == pytest.approx((350.0, 70.0, 280.0))
    assert (gb.energy.gross_j, gb.energy.idle_j, gb.energy.joules) == pytest.approx((250.0, 50.0, 200.0))
    assert ga.energy.attribution == gb.energy.attribution == "token-share"
    assert ga.energy.gross_j + gb.energy.gross_j == pytest.approx(600.0)


def test_overlap_without_token_counts_splits_evenly_and_says_so() -> None:
    clock = Clock()
    counter, _ = open_nvml(0, fake_nvml([0, 0, 0, 0, 200_000, 400_000, 600_000]))
    meter = EnergyMeter(counter, clock=clock)
    meter.measure_idle(0.0, sleep=lambda s: None)
    a = meter.begin()
    clock.t = 2.0
    b = meter.begin()
    clock.t = 4.0
    ga, gb = gen(20, 10), Generation(request_hash="h")  # B's engine reported no token counts
    meter.end(a, ga)
    clock.t = 6.0
    meter.end(b, gb)
    asyncio.run(meter.settle(EpisodeResult(benchmark="x", episode_id="a", repeat=0, generations=[ga, gb])))
    assert ga.energy is not None and ga.energy.attribution == "time-share"
    assert ga.energy.gross_j == pytest.approx(200.0 + 100.0)
    assert meter.idle_w is None and ga.energy.joules is None and ga.energy.reason == "no idle baseline was measured"


def powercap_zone(root: Path, name: str, label: str, energy: int, wrap: int = 262_143_328_850) -> Path:
    zone = root / name
    zone.mkdir(parents=True)
    (zone / "name").write_text(label + "\n")
    (zone / "energy_uj").write_text(f"{energy}\n")
    (zone / "max_energy_range_uj").write_text(f"{wrap}\n")
    return zone


def test_rapl_reads_package_zones_only_and_wraps(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    p0 = powercap_zone(root, "intel-rapl:0", "package-0", 1_000_000, wrap=10_000_000)
    p1 = powercap_zone(root, "intel-rapl:1", "package-1", 5_000_000)
    powercap_zone(root, "intel-rapl:0:0", "core", 7)  # inside package 0: counting it would count it twice
    powercap_zone(root, "intel-rapl-mmio:0", "package-0", 9)  # the same package through MMIO
    powercap_zone(root, "intel-rapl:2", "psys", 11)  # the platform, not the CPU
    counter, why = open_rapl(root)
    assert why is None and counter is not None
    assert counter.source == "rapl" and counter.detail == "intel-rapl:0, intel-rapl:1"
    a = counter.read()
    (p0 / "energy_uj").write_text("500000\n")  # wrapped past 10 J: 9 J to the wrap, then 0.5 J
    (p1 / "energy_uj").write_text("7000000\n")
    assert counter.delta_j(a, counter.read()) == pytest.approx(9.0 + 0.5 + 2.0)


def test_rapl_not_readable_or_absent_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_rapl(tmp_path / "none") == (
        None,
        f"{tmp_path / 'none'} not present (no RAPL driver, or a virtual machine that hides it)",
    )
    root = tmp_path / "powercap"
    zone = powercap_zone(root, "intel-rapl:0", "package-0", 1)
    real = Path.read_text

    def denied(self: Path, *a: Any, **k: Any) -> str:
        if self.name == "energy_uj":  # what a non-root user gets since Linux 5.10
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", denied)
    counter, why = open_rapl(root)
    assert counter is None
    assert why == f"{zone / 'energy_uj'}: not readable by this user (root only since Linux 5.10, CVE-2020-8694)"
    monkeypatch.undo()
    empty = tmp_path / "empty"
    powercap_zone(empty, "intel-rapl:0:0", "core", 1)
    assert open_rapl(empty) == (None, f"{empty}: no RAPL package zone")


def test_rapl_meter_on_a_fake_tree_measures_a_generation(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    zone = powercap_zone(root, "intel-rapl:0", "package-0", 0)
    counter, _ = open_rapl(root)
    clock = Clock()
    meter = EnergyMeter(counter, clock=clock)

    def idle(s: float) -> None:
        clock.t += s
        (zone / "energy_uj").write_text(str(int(10 * s * 1e6)))  # 10 W idle

    meter.measure_idle(2.0, sleep=idle)
    span = meter.begin()
    clock.t += 1.0
    (zone / "energy_uj").write_text(str(20_000_000 + 35_000_000))  # 35 J in 1 s
    g = gen(5, 5)
    meter.end(span, g)
    asyncio.run(meter.settle(EpisodeResult(benchmark="b", episode_id="e", repeat=0, generations=[g])))
    assert g.energy is not None and g.energy.joules == pytest.approx(25.0)
    assert meter.record().model_dump(include={"source", "resolution_j"}) == {"source": "rapl", "resolution_j": 1e-6}


def test_this_machine_powercap_is_measured_or_says_why() -> None:
    """On this host: a readable RAPL counter that counts up, or a reason (never a silent zero)."""
    counter, why = open_rapl()
    if counter is None:
        assert why
        return
    a = counter.read()
    sum(i * i for i in range(2_000_000))
    assert counter.delta_j(a, counter.read()) > 0


class CountingCounter:
    """A counter that counts 50 W of wall time: the runner test needs a counter, not a device."""

    source, detail, resolution_j = "rapl", "test", 1e-6

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def read(self) -> tuple[int, ...]:
        return (int(self.clock() * 50 * 1e6),)

    def delta_j(self, a: tuple[int, ...], b: tuple[int, ...]) -> float:
        return (b[0] - a[0]) * 1e-6


class SleepyEngine(Engine):
    """Implements ``generate`` (not ``chat``), so the meter is read by Engine.chat as for every real engine."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(fake_spec(), "x")
        self.clock = clock

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(max_concurrency=4, continuous_batching=True)

    async def load(self) -> None:
        return None

    async def generate(self, request: ChatRequest) -> Reply:
        n = len(request.messages[-1].content)
        for _ in range(n):
            await asyncio.sleep(0)
            self.clock.t += 0.25
        return Reply(Generation(request_hash="h", prompt_tokens=n, completion_tokens=n))


def test_concurrent_generations_through_engine_chat_attribute_every_joule() -> None:
    clock = Clock()
    meter = EnergyMeter(CountingCounter(clock), clock=clock)
    meter.measure_idle(1.0, sleep=lambda s: setattr(clock, "t", clock.t + s))
    engine = SleepyEngine(clock)
    engine.meter = meter
    start = clock.t

    async def episode(i: int) -> EpisodeResult:
        g = await engine.chat(ChatRequest(messages=[Message(role="user", content="x" * (4 + 3 * i))]))
        res = EpisodeResult(benchmark="b", episode_id=str(i), repeat=0, generations=[g])
        await meter.settle(res)
        return res

    async def go() -> list[EpisodeResult]:
        return list(await asyncio.gather(*(episode(i) for i in range(3))))

    results = asyncio.run(go())
    readings = [r.energy for r in results]
    assert all(e is not None and e.joules is not None for e in readings)
    assert {e.attribution for e in readings if e} == {"token-share"}
    # 50 W drawn, idle 50 W: net 0 for every generation, and the gross adds up to the counter over the busy time
    busy = clock.t - start
    assert sum(e.gross_j or 0 for e in readings if e) == pytest.approx(50 * busy)
    assert all(e.joules == pytest.approx(0.0, abs=1e-6) for e in readings if e)
    longest = max(results, key=lambda r: r.generations[0].completion_tokens or 0)
    assert longest.energy is not None and longest.energy.gross_j == max(e.gross_j or 0 for e in readings if e)
