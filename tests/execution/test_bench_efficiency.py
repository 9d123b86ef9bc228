"""Energy and MBU through `rig bench` end to end: stored per generation and episode, recorded in the manifest,
shown on the screen, in report.md, the export and after a resume; "not measured" with the reason otherwise."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
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
from rig.telemetry.peak import cache_path, describe, save_probe
from tests.telemetry.test_bandwidth import DAMAGED
from tests.telemetry.test_mbu import LLAMA, write_gguf
from tests.telemetry.test_peak import probe_record


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
    probe = probe_record(bps=1e9).model_copy(update={"flops_per_s": 1e11})
    save_probe(probe)
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
    # beside the MBU, where its peak came from: the probe's time, rig version and conditions
    assert f"MB per token); peak: {describe(probe)} |" in mbu_line and "in doubt" not in mbu_line
    table, lines = final_screen(run_dir)
    row = dict(zip(table.columns, table.rows[0], strict=True))
    joules, mbu = row["J/ep, MBU"].split(", ")
    assert joules.endswith(" J") and float(joules[:-2]) == pytest.approx(row_energy(run_dir), rel=0.01)
    assert mbu == f"MBU {100 * per_token * 500 / 1e9:.1f}%"
    assert lines[0] == f"MBU peak: {describe(probe)}"
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


def _mbu_line(md: str) -> str:
    return next(line for line in md.splitlines() if line.startswith("| Decode memory-bandwidth utilisation"))


@pytest.mark.parametrize(
    ("doubtful", "words"),
    [
        (dict(contended=True), "it was taken under load: other processes used 60% of 2 cores during the probe"),
        (dict(at=time.time() - 60 * 86400), "it is 60 days old (over 30)"),
        (dict(version="0.0.1"), "it was taken by rig 0.0.1, not"),
    ],
    ids=["marked", "old", "another rig"],
)
def test_a_report_over_a_marked_or_old_peak_says_so_beside_the_mbu(
    doubtful: dict[str, Any], words: str, tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (None, "no counter in this test"))
    save_probe(probe_record(bps=1e9, **doubtful))
    said: list[str] = []
    run_dir = run_bench(opts(tiny), on_event=said.append)
    note = next(m for m in said if m.startswith("note: the bandwidth peak this run's MBU is set against is in doubt"))
    assert words in note and note.endswith("run `rig doctor --bandwidth --refresh` on a quiet host")
    line = _mbu_line(report_markdown(run_dir))
    mbu, rest = line.split(" | ")[1].removesuffix(" |").split(" (", 1)
    assert 0 < float(mbu.rstrip("%")) < 100  # the MBU is still given, and beside it why its peak is in doubt
    assert f"; peak in doubt: {words}" in rest and rest.endswith(
        "run `rig doctor --bandwidth --refresh` on a quiet host"
    )
    table, lines = final_screen(run_dir)
    cell = dict(zip(table.columns, table.rows[0], strict=True))["J/ep, MBU"]
    assert cell.startswith("J not measured, MBU ") and cell.endswith("%*")
    assert any(x.startswith("* callnavi: peak in doubt: ") and words in x for x in lines), lines
    assert next(x for x in lines if x.startswith("MBU peak: ")).startswith("MBU peak: CPU probe of ")


def test_a_peak_below_what_the_run_achieved_never_gives_mbu_over_100(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run decodes at about 35 MB/s here (68 KB a token at 500 tokens/s); a cached peak of 10 MB/s is wrong."""
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (None, "no counter in this test"))
    save_probe(probe_record(bps=1e7, contended=True))
    run_dir = run_bench(opts(tiny))
    line = _mbu_line(report_markdown(run_dir))
    assert (
        "| not measured (over 100% of the cached peak (" in line
        and "against a peak of 0.01 GB/s): the peak is wrong" in line
    )
    assert "; achieved " in line and "; peak: CPU probe of " in line
    table, lines = final_screen(run_dir)
    assert dict(zip(table.columns, table.rows[0], strict=True))["J/ep, MBU"] == "J not measured, MBU: peak wrong*"
    assert any(x.startswith("* callnavi: MBU over 100% of the cached peak") for x in lines), lines


@pytest.mark.parametrize(("shape", "make", "words"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_bandwidth_cache_leaves_rig_bench_working(
    shape: str,
    make: Callable[[Path], None],
    words: str,
    tiny: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_hang: None,
) -> None:
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (None, "no counter in this test"))
    cache_path().parent.mkdir(parents=True)
    make(cache_path())
    said: list[str] = []
    run_dir = run_bench(opts(tiny), on_event=said.append)
    man = RunManifest.read(run_dir)
    assert man.status == "finished" and man.bandwidth is None
    assert man.bandwidth_reason is not None and words in man.bandwidth_reason
    assert man.bandwidth_reason.startswith(f"damaged bandwidth cache ignored ({cache_path()}: ")
    assert f"warning: {man.bandwidth_reason}; this run's MBU is not measured" in said
    assert read_results(run_dir / "results.sqlite")  # every episode ran and was stored
    line = _mbu_line(report_markdown(run_dir))
    assert f"| not measured (damaged bandwidth cache ignored ({cache_path()}: " in line and not re.search(
        r"-[\d.]+%", line
    )


def test_a_manifest_holding_a_damaged_probe_still_reads_and_never_shows_a_negative_mbu(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an earlier rig wrote from a damaged cache (MBU -291%): the run reads, its MBU says why it is not given."""
    monkeypatch.setattr(turn, "open_counter", lambda gpu: (None, "no counter in this test"))
    save_probe(probe_record(bps=1e9))
    run_dir = run_bench(opts(tiny))
    man = json.loads((run_dir / "manifest.json").read_text())
    man["bandwidth"]["bytes_per_s"] = -1.2e7
    (run_dir / "manifest.json").write_text(json.dumps(man))
    read = RunManifest.read(run_dir)
    assert read.bandwidth is None and read.bandwidth_reason == (
        "the run's recorded bandwidth probe is unusable (bytes_per_s: Input should be greater than 0)"
    )
    line = _mbu_line(report_markdown(run_dir))
    assert "| not measured (the run's recorded bandwidth probe is unusable (bytes_per_s: " in line and not re.search(
        r"-\d", line
    )


def test_compare_and_the_html_report_show_a_marked_peak_beside_the_mbu(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from rig.analyses.compare import compare_report
    from rig.render.html import html_report

    monkeypatch.setattr(turn, "open_counter", lambda gpu: (None, "no counter in this test"))
    save_probe(probe_record(bps=1e9, contended=True))
    runs = [run_bench(opts(tiny)), run_bench(opts(tiny))]
    md, _ = compare_report(runs)
    table = md.split("### Energy and memory bandwidth")[1].split("\n### ")[0]  # that section alone
    header = next(line for line in table.splitlines() if line.startswith("| Model"))
    assert "| Decode MBU |" in header and "| MBU peak (source; doubts) |" in header
    rows = [line for line in table.splitlines() if line.startswith("| tiny")]
    assert len(rows) == 2 and all("peak in doubt: it was taken under load: other processes used 60%" in r for r in rows)
    html = html_report(runs[:1], figures_dir=tiny / "figs")
    assert "peak in doubt: it was taken under load" in html and "CPU probe of " in html
