"""A device's peak as rig keeps it: the probe record, this host's cache of it, and what reports say of it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import rig
from rig.telemetry.peak import (
    BandwidthProbe,
    ProbeConditions,
    cache_path,
    cached_probe,
    cpu_name,
    describe,
    peak_doubts,
    save_probe,
)


def probe_record(
    device: str = "cpu",
    name: str | None = None,
    bps: float = 5e9,
    contended: bool = False,
    at: float | None = None,
    version: str | None = None,
    conditions: bool = True,
) -> BandwidthProbe:
    """A probe as `rig doctor --bandwidth` caches it; quiet, just taken by this rig unless told otherwise."""
    return BandwidthProbe(
        device=device,
        device_name=name or cpu_name(),
        host="h",
        method="test",
        bytes_per_s=bps,
        buffer_bytes=1,
        passes=1,
        measured_at=time.time() if at is None else at,
        conditions=ProbeConditions(
            rig_version=version or rig.__version__,
            wall_s=2.0,
            cores=2,
            others_share=0.6 if contended else 0.02,
            others_cpu_s=2.4 if contended else 0.08,
            load1_before=1.0,
            load1_after=1.5,
            contended=contended,
            contention="other processes used 60% of 2 cores during the probe" if contended else None,
        )
        if conditions
        else None,
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


def test_a_probe_of_another_cpu_or_a_damaged_cache_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    save_probe(probe_record(name="Some Other CPU"))
    probe, why = cached_probe(None)
    assert probe is None and why is not None and "probed on Some Other CPU, not this CPU" in why
    cache_path().write_text(json.dumps({"cpu": {"device": "cpu"}}))
    probe, why = cached_probe(None)
    assert probe is None and why == (
        f"damaged bandwidth cache ignored ({cache_path()}: cpu.device_name: Field required): "
        "run `rig doctor --bandwidth` once on this host to measure again"
    )


def test_peak_doubts_name_a_marked_old_or_other_version_probe() -> None:
    now = time.time()
    assert peak_doubts(probe_record()) == []
    assert peak_doubts(probe_record(contended=True)) == [
        "it was taken under load: other processes used 60% of 2 cores during the probe"
    ]
    assert peak_doubts(probe_record(at=now - 31 * 86400)) == ["it is 31 days old (over 30)"]
    assert peak_doubts(probe_record(at=now - 29 * 86400)) == []
    assert peak_doubts(probe_record(version="0.0.1")) == [f"it was taken by rig 0.0.1, not {rig.__version__}"]
    assert peak_doubts(probe_record(conditions=False)) == [
        "its conditions were not recorded (probed by an earlier rig)"
    ]
    # as of a run's start: a probe taken 10 days before a run is not old for that run's report
    assert peak_doubts(probe_record(at=now - 40 * 86400), at=now - 30 * 86400) == []


def test_describe_says_when_and_under_what_conditions() -> None:
    p = probe_record(at=1_700_000_000.0)
    assert describe(p) == (
        "CPU probe of 2023-11-14 22:13 UTC by rig "
        f"{rig.__version__}: quiet (others used 2% of 2 cores; load 1.00 before, 1.50 after)"
    )
    old = probe_record(at=1_700_000_000.0, conditions=False)
    assert describe(old) == "CPU probe of 2023-11-14 22:13 UTC, conditions not recorded"


@pytest.mark.parametrize("ahead_s", [1e20, 10 * 86400.0], ids=["past-any-calendar", "ten-days-ahead"])
def test_a_cached_probe_dated_in_the_future_is_damaged_not_used(
    ahead_s: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It passed validation, then every report of the run that copied it crashed formatting its date (1e20); one a
    few days ahead would never read as old. `rig doctor` now names it instead of ending in a traceback."""
    import os
    import subprocess
    import sys

    monkeypatch.setenv("RIG_CACHE", str(tmp_path))
    entry = probe_record().model_dump(mode="json")
    entry["measured_at"] = ahead_s if ahead_s > 1e12 else time.time() + ahead_s
    cache_path().parent.mkdir(parents=True)
    cache_path().write_text(json.dumps({"cpu": entry}))
    probe, why = cached_probe(None)
    assert probe is None and why is not None and why.startswith(f"damaged bandwidth cache ignored ({cache_path()}: ")
    assert "cpu.measured_at: " in why
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "doctor"], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert "Traceback" not in r.stderr and "damaged bandwidth cache ignored" in " ".join(r.stdout.split()), r.stderr


def test_reports_of_a_run_that_recorded_a_far_future_probe_still_render(tmp_path: Path) -> None:
    """`rig report` and `rig compare --run` of a run whose manifest copied such a probe: it was an OverflowError every
    time; the probe is now unusable by name and the MBU rows say not measured."""
    import shutil

    from typer.testing import CliRunner

    from rig.cli import app

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "run_before_issue17"
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        shutil.copytree(fixture, run)
        man = json.loads((run / "manifest.json").read_text())
        entry = probe_record().model_dump(mode="json") | {"measured_at": 1e20}
        man |= {"format_version": 2, "bandwidth": entry}
        (run / "manifest.json").write_text(json.dumps(man))
    r = CliRunner().invoke(app, ["report", str(runs[0])])
    assert r.exit_code == 0 and r.exception is None, r.output
    r = CliRunner().invoke(app, ["compare", "--run", str(runs[0]), "--run", str(runs[1]), "--out", str(tmp_path)])
    assert r.exit_code == 0 and r.exception is None, r.output
