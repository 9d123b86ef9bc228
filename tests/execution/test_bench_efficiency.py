"""Energy and MBU through `rig bench` end to end: stored per generation and episode, recorded in the manifest,
shown on the screen, in report.md, the export and after a resume; "not measured" with the reason otherwise."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from rig.engines.base import Capabilities, Engine, Reply
from rig.execution import bench, turn
from rig.execution.bench import BenchOptions, run_bench
from rig.records import ChatRequest, Generation, Timings
from rig.render.export import episode_rows
from rig.render.report import report_markdown
from rig.render.screen import final_screen
from rig.runfolder.manifest import RunManifest
from rig.runformat import read_results
from rig.telemetry import energy
from rig.telemetry.bandwidth import BandwidthProbe, cpu_name, save_probe
from tests.telemetry.test_mbu import LLAMA, write_gguf


class WallCounter:
    """40 W of wall time, as a RAPL zone would count it (the runner needs a counter, not a device)."""

    source, detail, resolution_j = "rapl", "intel-rapl:0", 1e-6

    def read(self) -> tuple[int, ...]:
        return (int(time.monotonic() * 40e6),)

    def delta_j(self, a: tuple[int, ...], b: tuple[int, ...]) -> float:
        return (b[0] - a[0]) * 1e-6


class DecodingEngine(Engine):
    """Implements ``generate`` like every real engine, so ``Engine.chat`` reads the meter around it."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(max_concurrency=1)

    async def load(self) -> None:
        return None

    async def generate(self, request: ChatRequest) -> Reply:
        await asyncio.sleep(0.02)
        prompt = request.messages[-1].content
        gen = Generation(
            request_hash=request.digest(),
            text='["x"]',
            prompt_tokens=len(prompt.split()),
            completion_tokens=9,
            finish_reason="stop",
            timings=Timings(e2e_s=0.02, ttft_s=0.005),
        )
        return Reply(gen, decode_s=0.016)  # 8 tokens after the first in 16 ms: 500 tokens/s


MODELS = (
    "models:\n  tiny:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: q8_0\n"
    "    context_length: 4096\n"
)


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "models.yaml").write_text(MODELS)
    write_gguf(tmp_path / "w.gguf", LLAMA, [("token_embd.weight", [64, 1000], 64_000), ("blk.0.w", [64, 64], 4_096)])
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: DecodingEngine(spec, weights))
    return tmp_path


def opts(tmp: Path, **kw: Any) -> BenchOptions:
    return BenchOptions(
        model="tiny", benchmark="callnavi", limit=2, models_file=tmp / "models.yaml", out=tmp / "runs",
        idle_window_s=0.2, **kw,
    )  # fmt: skip


def row_energy(run_dir: Path) -> float:
    results = read_results(run_dir / "results.sqlite")
    return sum(r.energy.joules for r in results if r.energy and r.energy.joules is not None) / len(results)


def test_a_run_with_a_counter_and_a_probe_stores_energy_and_mbu(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (WallCounter(), None))
    save_probe(
        BandwidthProbe(
            device="cpu",
            device_name=cpu_name(),
            host="h",
            method="test",
            bytes_per_s=1e9,
            buffer_bytes=1,
            passes=1,
            flops_per_s=1e11,
            measured_at=0.0,
        )
    )
    run_dir = run_bench(opts(tiny))
    results = read_results(run_dir / "results.sqlite")
    gens = [g for r in results for g in r.generations]
    assert gens and all(g.energy and g.energy.joules is not None and g.energy.attribution == "exclusive" for g in gens)
    for r in results:  # an episode's energy is the sum of its generations'
        assert r.energy is not None and r.energy.joules == pytest.approx(sum(g.energy.joules for g in r.generations))  # type: ignore[union-attr]
    man = RunManifest.read(run_dir)
    assert man.energy is not None and man.energy.source == "rapl" and man.energy.resolution_j == 1e-6
    (session,) = man.energy.sessions
    assert session.idle_w == pytest.approx(40.0, rel=0.05) and session.generations == len(gens)
    assert man.weights_profile is not None and man.weights_profile.touched_bytes == 68_096
    md = report_markdown(run_dir)
    assert "| Energy counter | rapl: intel-rapl:0 (counter unit 1e-06 J) |" in md
    # every generation decodes 8 tokens at 500 tokens/s, so the run's bytes per token is the mean over generations
    # of 68,096 weight bytes + the KV cache at the mean position, at 500 tokens/s, over the probe's 1 GB/s
    profile = man.weights_profile
    per_token = sum(profile.bytes_per_token((g.prompt_tokens or 0) + 4.5) for g in gens) / len(gens)
    mbu_line = next(line for line in md.splitlines() if line.startswith("| Decode memory-bandwidth utilisation"))
    assert f"| {100 * per_token * 500 / 1e9:.1f}% (" in mbu_line
    assert "not measured" not in mbu_line
    table, _ = final_screen(run_dir)
    row = dict(zip(table.columns, table.rows[0], strict=True))
    joules, mbu = row["J/ep, MBU"].split(", ")
    assert joules.endswith(" J") and float(joules[:-2]) == pytest.approx(row_energy(run_dir), rel=0.01)
    assert mbu == f"MBU {100 * per_token * 500 / 1e9:.1f}%"
    rows = episode_rows(run_dir)
    assert all(r["energy_j"] is not None and r["energy_not_measured"] is None for r in rows)

    before = {(r.episode_id, r.repeat): r.energy for r in results}
    run_bench(BenchOptions(resume=run_dir.name, out=tiny / "runs", models_file=tiny / "models.yaml", idle_window_s=0.2))
    after = {(r.episode_id, r.repeat): r.energy for r in read_results(run_dir / "results.sqlite")}
    assert after == before  # stored readings survive a resume untouched
    man = RunManifest.read(run_dir)
    assert man.energy is not None and len(man.energy.sessions) == 2  # each process's stretch is kept


def test_a_run_without_a_counter_or_probe_says_why_never_zero(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP", tiny / "no-powercap")
    monkeypatch.setattr(turn, "open_counter", lambda gpu: energy.open_rapl(tiny / "no-powercap"))
    run_dir = run_bench(opts(tiny))
    results = read_results(run_dir / "results.sqlite")
    why = f"{tiny / 'no-powercap'} not present (no RAPL driver, or a virtual machine that hides it)"
    assert all(r.energy is not None and r.energy.joules is None and r.energy.reason == why for r in results)
    md = report_markdown(run_dir)
    assert f"| Energy per episode (J, net of idle) | not measured ({why}) |" in md
    assert "| Decode memory-bandwidth utilisation | not measured (no bandwidth probe for this host: run " in md
    assert "| 0.0" not in md.split("### Energy and memory bandwidth")[1]
    table, _ = final_screen(run_dir)
    assert "J/ep, MBU" not in table.columns  # a column of "not measured" is one line under the table
    assert table.note and table.note.endswith("energy per episode and decode MBU: not measured (report.md says why)")
    rows = episode_rows(run_dir)
    assert all(r["energy_j"] is None and r["energy_not_measured"] == why for r in rows)


def test_an_older_run_folder_reads_as_not_measured(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (WallCounter(), None))
    run_dir = run_bench(opts(tiny))
    # what a format-1 rig wrote: no energy, bandwidth or weights in the manifest, none in the stored records
    man = json.loads((run_dir / "manifest.json").read_text())
    for key in ("format_version", "energy", "bandwidth", "bandwidth_reason", "weights_profile", "weights_reason"):
        man.pop(key)
    (run_dir / "manifest.json").write_text(json.dumps(man))
    import sqlite3

    con = sqlite3.connect(run_dir / "results.sqlite")
    for key, record in con.execute("SELECT episode_id, record FROM results").fetchall():
        data = json.loads(record)
        data.pop("energy")
        for g in data["generations"]:
            g.pop("energy")
        con.execute("UPDATE results SET record = ? WHERE episode_id = ?", (json.dumps(data), key))
    con.commit()
    con.close()
    md = report_markdown(run_dir)
    assert "| Energy per episode (J, net of idle) | not measured (recorded before rig measured energy) |" in md
    assert "| Decode memory-bandwidth utilisation | not measured (recorded before rig measured MBU) |" in md
    assert all(r["energy_not_measured"] == "recorded before rig measured energy" for r in episode_rows(run_dir))


def test_compare_and_the_dashboard_plot_score_against_energy(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from rig.analyses.compare import compare_report
    from rig.render.html import html_report

    monkeypatch.setattr(turn, "open_counter", lambda gpu: (WallCounter(), None))
    measured = run_bench(opts(tiny))
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (None, "no counter in this test"))
    unmeasured = run_bench(opts(tiny))
    md, figs = compare_report([measured, unmeasured])
    assert "### Energy and memory bandwidth" in md and "pareto_energy" in figs
    row = next(line for line in md.splitlines() if line.startswith("| tiny") and "no counter in this test" in line)
    assert "| not measured |" in row  # the unmeasured variant's J/episode, never 0
    html_report([measured, unmeasured], figures_dir=tiny / "figs")
    assert (tiny / "figs" / "pareto_energy.svg").is_file()
    html = html_report([unmeasured, unmeasured], figures_dir=tiny / "figs2")
    assert "Score against energy: not measured in any of these runs" in html
    assert not (tiny / "figs2" / "pareto_energy.svg").exists()
    md, figs = compare_report([unmeasured, unmeasured])
    assert "pareto_energy" not in figs and "Score against energy: not measured in any variant" in md
