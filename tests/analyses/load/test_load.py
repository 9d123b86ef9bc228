"""rig load's library: flag parsing, a level's numbers from its run folder, the verdict, a level's `rig bench --spec`.

The levels here are runs made with the fake engine (a runner unit test's engine); real engines at three levels are
in tests/analyses/load/test_load_engines.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from pathlib import Path

import pytest

from rig.analyses.load.measure import analyse, peak_in_flight
from rig.analyses.load.records import LoadReport, LoadSettings
from rig.analyses.load.render import write_load
from rig.analyses.load.run import run_load
from rig.analyses.load.slo import Slo, parse_levels, parse_slos
from rig.benchmarks.base import RunContext
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.execution.bench import BenchError, BenchOptions
from rig.execution.runner import plan, run_items
from rig.records import EpisodeResult, Sampling
from rig.runfolder.store import Store
from tests.execution.test_runner import oracle
from tests.fakes import FakeEngine
from tests.render.test_html import CHROMIUM, _can_isolate, _chromium
from tests.render.test_report import _build_fake, cutting_engine, make_run

REPO = Path(__file__).resolve().parents[3]


def test_slos_parse_with_units() -> None:
    slos = parse_slos("ttft_p95=2s, e2e_p99=500ms,e2e_p50=1.5m,ttft_p50=3")
    assert [(s.key, s.limit_s) for s in slos] == [
        ("ttft_p95", 2.0),
        ("e2e_p99", 0.5),
        ("e2e_p50", 90.0),
        ("ttft_p50", 3.0),
    ]
    assert parse_slos(None) == [] and parse_slos("") == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("ttft_p95", "'ttft_p95': expected KEY=DURATION"),
        ("latency_p95=2s", "'latency_p95=2s': expected KEY=DURATION"),
        ("ttft_p90=2s", "'ttft_p90=2s': expected KEY=DURATION"),
        ("ttft_p95=fast", "'ttft_p95=fast': 'fast' is not a duration"),
        ("ttft_p95=2h", "'ttft_p95=2h': '2h' is not a duration"),
        ("ttft_p95=0s", "'ttft_p95=0s': the limit must be above 0"),
        ("ttft_p95=1s,ttft_p95=2s", "'ttft_p95=2s': ttft_p95 is given twice"),
    ],
)
def test_bad_slo_names_the_flag_and_the_item(text: str, words: str) -> None:
    with pytest.raises(BenchError) as e:
        parse_slos(text)
    assert str(e.value).startswith("--slo ") and words in str(e.value)
    assert "\n" not in str(e.value)


def test_levels() -> None:
    assert parse_levels("1, 2,4") == [1, 2, 4]
    for bad, words in (
        ("1,x", "'x' is not a whole number"),
        ("0,1", "0 is below 1"),
        ("1,4,2", "ascending"),
        ("1,2,2", "listed twice"),
        ("2,4", "the first level must be 1"),
        ("1", "at least two levels"),
    ):
        with pytest.raises(BenchError, match=words):
            parse_levels(bad)


def _result(i: int, start: float | None, end: float | None) -> EpisodeResult:
    return EpisodeResult(benchmark="b", episode_id=f"e{i}", repeat=0, started_at=start, finished_at=end)


def test_peak_in_flight_from_start_and_finish_times() -> None:
    spans = [(0, 4), (1, 2), (1.5, 3), (2, 5), (5, 6)]  # at 1.5: three running; spans that touch do not overlap
    assert peak_in_flight([_result(i, a, b) for i, (a, b) in enumerate(spans)]) == 3
    assert peak_in_flight([_result(0, 0, 1), _result(1, 1, 2)]) == 1
    assert peak_in_flight([_result(0, 0, 1), _result(1, None, 2)]) is None  # not measured, not a guess
    assert peak_in_flight([]) is None


def level_run(tmp_path: Path, level: int, engine: FakeEngine, n_eps: int = 8) -> Path:
    """A run folder made with `level` episodes in flight (make_run runs one at a time)."""
    run_dir = make_run(tmp_path, n_eps=n_eps, engine=engine)
    _spec, _w, bench, eps, _cfg = _build_fake(n_eps)
    (run_dir / "results.sqlite").unlink()
    for extra in run_dir.glob("results.sqlite-*"):
        extra.unlink()
    engine.concurrency, engine.delay = level, 0.01  # long enough for the episodes to overlap
    store = Store(run_dir / "results.sqlite")
    asyncio.run(run_items(plan([(bench, eps)], 1), engine, store, RunContext(sampling=Sampling()), concurrency=level))
    store.close()
    return run_dir


def _levels(tmp_path: Path) -> list[Path]:
    """Level 1 and 2 answer right; level 4 cuts every second reply (wrong answers): flips to wrong."""
    return [
        level_run(tmp_path / "c1", 1, cutting_engine(0)),
        level_run(tmp_path / "c2", 2, cutting_engine(0)),
        level_run(tmp_path / "c4", 4, cutting_engine(2)),
    ]


def test_verdict_is_the_highest_level_non_inferior_to_level_1(tmp_path: Path) -> None:
    settings = LoadSettings(bench=BenchOptions(), levels=[1, 2, 4], slos=parse_slos("e2e_p95=30s"), margin=0.05)
    rep = analyse(settings, _levels(tmp_path))
    one, two, four = rep.results
    assert (one.score, two.score) == (1.0, 1.0) and four.score == 0.5
    assert (four.paired, four.flips_to_wrong, four.flips_to_correct) == (8, 4, 0)
    assert two.paired == 8 and two.flips_to_wrong == two.flips_to_correct == 0
    assert (one.replies_changed, two.replies_changed, four.replies_changed) == (0, 0, 4)  # the four cut replies
    assert two.non_inferior is True and four.non_inferior is False
    assert four.diff == -0.5 and four.diff_low is not None and four.diff_low < -0.05
    assert "accuracy inferior to level 1" in four.why_not[0]
    assert rep.verdict.level == 2, rep.verdict
    assert "level 4: accuracy inferior" in rep.verdict.reason
    # every request met the SLO: every episode is good
    assert two.goodput_share == 1.0 and two.goodput_per_s is not None and two.goodput_per_s > 0
    assert all(c.holds for r in rep.results for c in r.slos)


def test_a_level_that_was_not_reached_does_not_pass(tmp_path: Path) -> None:
    runs = [level_run(tmp_path / "c1", 1, cutting_engine(0)), level_run(tmp_path / "c4", 2, cutting_engine(0))]
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 4]), runs)  # "level 4" ran two at a time
    assert rep.results[1].peak_in_flight == 2
    assert rep.results[1].why_not == ["level not reached: at most 2 episode(s) were in flight at once"]
    assert rep.verdict.level == 1


def test_a_wider_margin_admits_the_inferior_level(tmp_path: Path) -> None:
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 2, 4], margin=0.9), _levels(tmp_path))
    assert rep.verdict.level == 4


def test_impossible_slo_gives_verdict_none_with_the_reason(tmp_path: Path) -> None:
    runs = [level_run(tmp_path / f"c{n}", n, FakeEngine(oracle(CallNavi())), 6) for n in (1, 2, 4)]
    settings = LoadSettings(bench=BenchOptions(), levels=[1, 2, 4], slos=parse_slos("e2e_p95=1ms"))
    rep = analyse(settings, runs)
    assert rep.verdict.level is None
    assert all(not r.passes for r in rep.results)
    for n in (1, 2, 4):
        assert f"level {n}: SLO e2e_p95 missed: " in rep.verdict.reason
    assert "> 0.001 s" in rep.verdict.reason
    assert all(r.goodput_share == 0.0 for r in rep.results)  # no episode met it: measured 0, not missing
    md = write_load(tmp_path, rep)
    assert "**Verdict: none** (level 1: SLO e2e_p95 missed" in md


def test_unmeasured_values_say_so_and_fail_the_slo(tmp_path: Path) -> None:
    import sqlite3

    runs = _levels(tmp_path)[:2]
    for run in runs:  # as if the engine had reported no time to first token
        db = sqlite3.connect(run / "results.sqlite")
        rows = db.execute("SELECT rowid, record FROM results").fetchall()
        for rowid, record in rows:
            rec = json.loads(record)
            for g in rec["generations"]:
                g["timings"]["ttft_s"] = None
            db.execute("UPDATE results SET record = ? WHERE rowid = ?", (json.dumps(rec), rowid))
        db.commit()
        db.close()
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 2], slos=parse_slos("ttft_p95=2s")), runs)
    r = rep.results[1]
    assert r.ttft_s == {"p50": None, "p95": None, "p99": None}
    assert r.slos[0].value_s is None and r.slos[0].holds is None
    assert r.goodput_per_s is None and r.goodput_note == "ttft not measured for every request"
    assert rep.verdict.level is None and "SLO ttft_p95 not measured" in rep.verdict.reason
    md = write_load(tmp_path, rep)
    row = next(x for x in md.splitlines() if x.startswith("| 2 |"))
    assert "not measured" in row and "| 0.000 |" not in row.split("| 1.000 |", 1)[0]


def test_report_files_and_round_trip(tmp_path: Path) -> None:
    settings = LoadSettings(bench=BenchOptions(), levels=[1, 2, 4], slos=parse_slos("ttft_p95=2s"))
    rep = analyse(settings, _levels(tmp_path))
    md = write_load(tmp_path, rep)
    assert LoadReport.model_validate_json((tmp_path / "load.json").read_text()) == rep
    assert (tmp_path / "load.md").read_text() == md
    assert "| Concurrency | Peak in flight |" in md and "**Verdict: concurrency 2**" in md
    assert "| 4 | 4 | 8 | 0.500 |" in md  # observed in flight: 4
    svg = (tmp_path / "load.svg").read_text()
    assert all(f'id="score:{n}"' in svg for n in (1, 2, 4))
    assert 'id="latency:TTFT p95"' in svg and 'id="latency:E2E p95"' in svg
    assert (tmp_path / "load.png").read_bytes()[:4] == b"\x89PNG"


def test_load_html_page_holds_the_verdict_table_and_figure(tmp_path: Path) -> None:
    """load.html beside load.md: self-contained (the run report's CSP, nothing fetched), the verdict, the table's
    columns and each level's row with its values, and the score / p95 figure inline as SVG."""
    pytest.importorskip("matplotlib")
    import re
    from html import unescape

    settings = LoadSettings(bench=BenchOptions(), levels=[1, 2, 4], slos=parse_slos("ttft_p95=2s"))
    rep = analyse(settings, _levels(tmp_path))
    write_load(tmp_path, rep)
    page = (tmp_path / "load.html").read_text()
    assert page.startswith("<!doctype html>") and "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page) and "<link" not in page
    assert "<b>Verdict: concurrency 2</b>" in page and unescape(rep.verdict.reason) in unescape(page)
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    cells = [[unescape(c) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", r)] for r in rows]
    assert cells[0][:3] == ["Concurrency", "Peak in flight", "Samples"] and cells[0][-1] == "Passes"
    assert [c[0] for c in cells[1:]] == ["1", "2", "4"]
    assert cells[3][:4] == ["4", "4", "8", "0.500"] and cells[3][-1].startswith("no: ")
    svg = re.search(r"<svg.*?</svg>", page, re.S)
    assert svg is not None
    assert all(re.search(rf'id="f[0-9a-f]+-score:{n}"', svg.group(0)) for n in (1, 2, 4))
    assert re.search(r'id="f[0-9a-f]+-latency:TTFT p95"', svg.group(0))


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.skipif(not _can_isolate(), reason="unshare -n is not permitted here; Chromium is not run un-isolated")
def test_load_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 2, 4]), _levels(tmp_path))
    write_load(tmp_path, rep)
    dom = _chromium(tmp_path, tmp_path / "load.html", tmp_path / "load_page.png")
    assert dom.count("<tr>") == 4 and "Verdict: concurrency 2" in dom


def test_load_html_without_matplotlib_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rig.analyses.load import render as load_mod
    from rig.render.plots import PlotsUnavailable

    def no_plots(_rep: LoadReport) -> None:
        raise PlotsUnavailable("figures need matplotlib: pip install 'rig[plots]'")

    monkeypatch.setattr(load_mod, "load_figure", no_plots)
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 2]), _levels(tmp_path)[:2])
    write_load(tmp_path, rep)
    page = (tmp_path / "load.html").read_text()
    assert "<svg" not in page and "No figure: figures need matplotlib" in page
    assert "<th>Concurrency</th>" in page


def test_no_slo_means_goodput_not_measured(tmp_path: Path) -> None:
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 2]), _levels(tmp_path)[:2])
    assert rep.results[1].goodput_per_s is None and rep.results[1].goodput_note == "no SLO given"
    assert rep.verdict.level == 2
    assert "| no SLO given |" in write_load(tmp_path, rep)


def test_level_settings_file_errors_name_file_and_field(tmp_path: Path) -> None:
    """A level is `rig bench --spec FILE` (the spec.json compare and sweep cells get): a bad file names file and
    field, exit 2, no traceback."""
    from typer.testing import CliRunner

    from rig.analyses.load.run import level_argv
    from rig.cli import app

    def bench(argv: list[str]) -> str:
        assert argv[1:4] == ["-m", "rig.cli", "bench"]
        r = CliRunner().invoke(app, argv[3:])
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        return " ".join(r.output.split())

    bad = tmp_path / "level-2" / "spec.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"model": "m", "concurrency": "many"}))
    out = ["--out", str(tmp_path), "--no-report"]
    assert f"{bad}: concurrency: 'many': Input should be a valid integer" in bench(
        ["py", "-m", "rig.cli", "bench", "--spec", str(bad), *out]
    )
    assert "missing.json: file not found" in bench(
        ["py", "-m", "rig.cli", "bench", "--spec", str(tmp_path / "missing.json"), *out]
    )
    o = BenchOptions(model="no-such-model", benchmark="callnavi", out=tmp_path, models_file=REPO / "models.yaml")
    argv = level_argv(tmp_path / "load", 1, o, None)
    assert json.loads((tmp_path / "load" / "specs" / "level-1" / "spec.json").read_text())["concurrency"] == 1
    assert "no-such-model" in bench(argv)


def test_a_level_above_what_the_engine_serves_is_refused_before_anything_runs(tmp_path: Path) -> None:
    bench = BenchOptions(
        model="gemma3-270m", benchmark="callnavi", out=tmp_path / "out", models_file=REPO / "models.yaml"
    )
    with pytest.raises(BenchError, match=r"--concurrency 4: model 'gemma3-270m' \(engine llamacpp\) serves at most 1"):
        run_load(LoadSettings(bench=bench, levels=[1, 2, 4]))
    assert not (tmp_path / "out").exists()


def test_slo_model_refuses_a_non_positive_limit() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Slo(metric="ttft", quantile="p95", limit_s=0)


def _stand_in_levels(tmp_path: Path, ends: dict[int, tuple[int, bool]]):  # type: ignore[no-untyped-def]
    """A level process stand-in (the fake engine cannot cross a process) that makes its level's run folder, or
    resumes the one it is given, and finishes it; a level in ``ends`` ends the first time with that (exit code,
    stopped) and its run unfinished. Returns the calls, each (the level's RunSpec, the run it was to resume)."""
    import shutil

    from rig.runfolder.manifest import RunManifest
    from rig.runfolder.spec import RunSpec, read_spec

    calls: list[tuple[RunSpec, str | None]] = []

    def child(argv: list[str]) -> tuple[int, bool]:
        flag = {k: v for k, v in itertools.pairwise(argv) if k.startswith("--")}
        ran = read_spec(Path(flag["--spec"]))
        out, resume = Path(flag["--out"]), flag.get("--resume")
        calls.append((ran, resume))
        run_id = resume or f"run-c{ran.concurrency}"
        if resume is None:
            made = level_run(tmp_path / f"scratch-{len(calls)}", ran.concurrency, cutting_engine(0), 6)
            out.mkdir(parents=True, exist_ok=True)
            shutil.move(made, out / run_id)
        man = RunManifest.read(out / run_id)
        man.run_id, man.concurrency = run_id, ran.concurrency
        end = ends.pop(ran.concurrency, (0, False))
        man.status = "finished" if end == (0, False) else "interrupted"
        man.write(out / run_id)
        return end

    return calls, child


def _stood_in_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ends: dict[int, tuple[int, bool]], levels=(1, 2, 4)
):  # type: ignore[no-untyped-def]
    """A load's settings whose level processes are ``_stand_in_levels``; the calls they get, and the settings."""
    import rig.analyses.load.run as load

    calls, child = _stand_in_levels(tmp_path, ends)
    monkeypatch.setattr(load, "run_child", child)
    monkeypatch.setattr(load, "_check", lambda _s: None)  # no registry model behind the stand-in
    bench = BenchOptions(model="m", benchmark="callnavi", out=tmp_path / "out")
    return calls, LoadSettings(bench=bench, levels=list(levels))


def test_resume_keeps_finished_levels_and_resumes_the_unfinished_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The level processes are stood in for (the fake engine cannot cross a process): each makes its level's run
    folder; level 2 dies the first time with its run unfinished."""
    from rig.analyses.load.run import LoadPlan

    calls, settings = _stood_in_load(tmp_path, monkeypatch, ends={2: (1, False)})
    with pytest.raises(BenchError, match=r"level 2: rig bench failed \(exit 1\).*resume with: rig load --resume load-"):
        run_load(settings)
    ldir = next((tmp_path / "out").glob("load-*"))
    assert LoadPlan.model_validate_json((ldir / "plan.json").read_text()).runs == {1: "run-c1", 2: "run-c2"}
    assert [c.concurrency for c, _ in calls] == [1, 2]
    assert all(c.seed == 0 for c, _ in calls)

    calls.clear()
    got_dir, got, runs = run_load(None, resume=ldir.name, out=tmp_path / "out")
    assert got_dir == ldir and got.levels == [1, 2, 4]
    assert [(c.concurrency, r) for c, r in calls] == [(2, "run-c2"), (4, None)]  # level 1 was finished
    assert [r.name for r in runs] == ["run-c1", "run-c2", "run-c4"]
    assert analyse(got, runs).verdict.level == 4

    with pytest.raises(BenchError, match=r"--resume nope: .*plan.json: cannot read"):
        run_load(None, resume="nope", out=tmp_path / "out")
    (ldir / "plan.json").write_text('{"settings": {"levels": "x"}}')
    with pytest.raises(BenchError, match=r"plan.json: settings.bench: Field required"):
        run_load(None, resume=ldir.name, out=tmp_path / "out")


def test_without_matplotlib_the_report_says_why_there_is_no_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rig.render.plots as plots

    def missing(*_a: object, **_k: object) -> None:
        raise plots.PlotsUnavailable(plots.MISSING)

    monkeypatch.setattr(plots, "load_plot", missing)
    rep = analyse(LoadSettings(bench=BenchOptions(), levels=[1, 2]), _levels(tmp_path)[:2])
    md = write_load(tmp_path, rep)
    assert "_No figure: figures need matplotlib: pip install 'rig[plots]'._" in md
    assert not (tmp_path / "load.svg").exists() and (tmp_path / "load.json").is_file()


def test_a_stopped_level_is_recorded_and_resumed_not_orphaned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a level used to end `rig load` before the level's run was written to plan.json, so --resume
    started the level again as a new run and the interrupted one was orphaned (issue 37)."""
    import rig.analyses.load.run as load
    from rig.interrupt import Stopped

    calls, settings = _stood_in_load(tmp_path, monkeypatch, ends={2: (130, True)})
    with pytest.raises(Stopped, match=r"level 2 stopped; .*resume with: rig load --resume load-"):
        run_load(settings)
    ldir = next((tmp_path / "out").glob("load-*"))
    assert load.LoadPlan.model_validate_json((ldir / "plan.json").read_text()).runs == {1: "run-c1", 2: "run-c2"}
    calls.clear()
    _, _, runs = run_load(None, resume=ldir.name, out=tmp_path / "out")
    assert [(c.concurrency, r) for c, r in calls] == [(2, "run-c2"), (4, None)]  # resumed, no second run of level 2
    assert sorted(p.name for p in (ldir / "runs").iterdir()) == ["run-c1", "run-c2", "run-c4"]
    assert [r.name for r in runs] == ["run-c1", "run-c2", "run-c4"]


def test_resume_refuses_changed_settings_naming_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rig load --resume` went on with the recorded settings whatever was given; now, as `rig bench --resume`, a
    changed one is refused, naming each (issue 37)."""
    from rig.analyses.load.slo import parse_slos
    from rig.interrupt import Stopped

    _, settings = _stood_in_load(tmp_path, monkeypatch, ends={2: (130, True)}, levels=[1, 2])
    with pytest.raises(Stopped):
        run_load(settings)
    ldir = next((tmp_path / "out").glob("load-*"))
    given = {"seed": 3, "levels": [1, 4], "model": "m", "slos": parse_slos("e2e_p95=2s"), "options": {"x": "1"}}
    with pytest.raises(BenchError) as e:
        run_load(None, resume=ldir.name, out=tmp_path / "out", given=given)
    msg = str(e.value)
    for words in ("--seed: 0 -> 3", "--concurrency: [1, 2] -> [1, 4]", "--slo:  -> e2e_p95=2s", "-O x: None -> '1'"):
        assert words in msg, msg
    assert "--model" not in msg  # given as recorded: fine
    # the same settings given again resume
    run_load(None, resume=ldir.name, out=tmp_path / "out", given={"seed": 0, "levels": [1, 2]})


def test_a_level_process_is_stopped_and_waited_for(tmp_path: Path) -> None:
    """The real `run_child`: a stop here (a SIGTERM to this process alone, taken as Ctrl-C) is passed on to the
    level's process, which is waited for while it stops, so its run is marked interrupted before `rig load` ends."""
    import signal
    import sys
    import threading

    from rig.interrupt import run_child, sigterm_as_interrupt

    ready, done = tmp_path / "ready", tmp_path / "done"
    code = (
        "import pathlib, signal, sys, time\n"
        f"def stop(*_):\n    time.sleep(0.5); pathlib.Path({str(done)!r}).write_text('x'); sys.exit(130)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(60)\n"
    )

    def stop_when_ready() -> None:
        for _ in range(600):
            if ready.exists():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    threading.Thread(target=stop_when_ready, daemon=True).start()
    t0 = time.monotonic()
    with sigterm_as_interrupt():
        rc, stopped = run_child([sys.executable, "-c", code])
    assert (rc, stopped) == (130, True) and done.exists()  # the child finished its stop before this returned
    assert time.monotonic() - t0 < 30
