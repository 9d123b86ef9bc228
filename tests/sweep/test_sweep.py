"""rig sweep without a model: the real `rig bench` in each cell's process, with a fake engine installed as a plugin
(tests/sweep/fake_cell.py, tests/sweep/conftest.py), so scheduling, resume, retries, shards and the leaderboard are
tested in seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rig.analyses.compare import run_summary
from rig.execution.bench import RunLock
from rig.runfolder.manifest import RunManifest
from rig.runfolder.store import Store
from rig.sweep.leaderboard import write_leaderboard
from rig.sweep.run import JobState, attempt, job_dir, run_folder, run_sweep
from rig.sweep.spec import load_sweep
from tests.conftest import REPO

MODELS = """models:
  fake-a: {engine: fake, weights: {file: fake.gguf}, quantization: q4_k_m, context_length: 4096,
           sampling: {temperature: 0.0, max_tokens: 16, seed: 0}}
  fake-b: {engine: fake, weights: {file: fake.gguf}, quantization: q4_0, context_length: 4096,
           sampling: {temperature: 0.0, max_tokens: 16, seed: 0}}
"""


@pytest.fixture
def sweep_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "fake.gguf").write_bytes(b"GGUF")
    (tmp_path / "models.yaml").write_text(MODELS)
    monkeypatch.chdir(REPO)  # the cells import the plugins' code from the repository
    monkeypatch.setenv("FAKE_DELAY", "0.05")
    return tmp_path


def write(d: Path, text: str, name: str = "sweep.yaml") -> Path:
    (d / name).write_text(text)
    return d / name


def stored(run: Path) -> list[tuple[str, int]]:
    s = Store(run / "results.sqlite")
    try:
        return [(r.episode_id, r.repeat) for r in s.results()]
    finally:
        s.close()


@pytest.mark.parametrize(
    "text,where",
    [
        ("models: [fake-a, nope]\nbenchmarks: [callnavi]\n", "models[1]"),
        ("models: [fake-a]\nbenchmarks: [callnav]\n", "benchmarks[0].name"),
        ("models: [fake-a]\nbenchmarks: [{name: callnavi, options: {taskk: routing}}]\n", "benchmarks[0].options"),
        ("models: [fake-a]\nbenchmarks: [{name: callnavi, options: {task: both2}}]\n", "benchmarks[0].options"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\nrepeat: 2\n", "repeat"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\nresources: {num_gpu: 1}\n", "resources.num_gpu"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\ndecode: [xml]\n", "decode[0]"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\nbaseline: fake-b\n", "baseline"),
        # duplicate cells ran twice into one cell folder, raced there, and a re-run could not recover
        ("models: [fake-a, fake-b, fake-a]\nbenchmarks: [callnavi]\n", "models[2]"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\ndecode: [none, json, none]\n", "decode[2]"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\ntool_mode: [json, json]\n", "tool_mode[1]"),
        ("models: [fake-a]\nbenchmarks: [callnavi, {name: callnavi}]\n", "benchmarks[1]"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\ntemperature: .nan\n", "temperature"),
        ("models: [fake-a]\nbenchmarks: [callnavi]\ntemperature: .inf\n", "temperature"),
    ],
)
def test_bad_sweep_file_is_refused_before_anything_runs(sweep_dir: Path, text: str, where: str) -> None:
    f = write(sweep_dir, text + "models_file: models.yaml\n")
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "sweep", str(f), "--out", str(sweep_dir / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert f"{f}: {where}:" in r.stderr
    assert not (sweep_dir / "out").exists()


def test_one_model_under_two_names_is_refused_as_a_duplicate(sweep_dir: Path) -> None:
    """A base name and its default variant's full name are one model: two cells would run the same thing."""
    from rig.sweep.spec import SweepError

    (sweep_dir / "models.yaml").write_text(
        MODELS + "  fake-v:\n    engine: fake\n    weights: {file: fake.gguf}\n    context_length: 4096\n"
        "    variants: {q4: {quantization: q4_0}}\n"
    )
    f = write(sweep_dir, "models: [fake-v-q4, fake-a, fake-v]\nbenchmarks: [callnavi]\nmodels_file: models.yaml\n")
    with pytest.raises(SweepError, match=r"models\[2\]: 'fake-v' is the model 'fake-v-q4', listed as 'fake-v-q4'"):
        load_sweep(f)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\0\0\0\xff\xfe\x00"), "not UTF-8 text"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: os.mkfifo(p), "is a FIFO"),
    ],
    ids=["binary", "directory", "fifo"],
)
def test_a_sweep_file_that_is_not_text_exits_2(sweep_dir: Path, make, says: str) -> None:  # type: ignore[no-untyped-def]
    f = sweep_dir / "sweep.yaml"
    make(f)
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "sweep", str(f), "--out", str(sweep_dir / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert f"{f}: " in r.stderr and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (sweep_dir / "out").exists()


def test_sweep_runs_each_cell_then_skips_finished_ones(sweep_dir: Path) -> None:
    f = write(
        sweep_dir,
        "models: [fake-a, fake-b]\nbenchmarks:\n  - {name: callnavi, options: {task: routing}}\n"
        "  - {name: callnavi, options: {task: params}}\nlimit: 2\nmodels_file: models.yaml\n",
    )
    spec, cells = load_sweep(f)
    out = sweep_dir / "out"
    seen: list[str] = []  # statuses the live table was shown
    res = run_sweep(
        spec, cells, out, on_update=lambda jobs, _o: seen.extend(j.status for j in jobs), say=lambda m: None
    )
    assert res.failed == [] and len(res.cells) == 4
    assert all(j.status == "done" and j.attempts == 1 for j in res.jobs)
    assert "running" in seen and "pending" in seen  # the live table saw cells wait and run
    runs = {k: Path(v) for k, v in res.cells.items() if v}
    for c in cells:  # each cell in its own folder named from its hash, one run folder inside
        assert runs[c.key].parent == out / "cells" / c.key
        man = RunManifest.read(runs[c.key])
        assert man.status == "finished" and man.config.model.name == c.model
        assert man.config.benchmarks[0].options["task"] == c.options["task"] and man.config.limit == 2
    md = write_leaderboard(out, cells, res.cells, "fake-a")
    for c in cells:  # the leaderboard row is the run's own RunSummary, not a recomputation
        s = run_summary(runs[c.key])
        h = s.headline
        assert h is not None and h.samples == 2
        row = next(line for line in md.splitlines() if line.endswith(f"| {c.key} |"))
        assert f"| {s.model} | {s.quantization} | callnavi task={c.options['task']} | none | prompt | 2 | " in row
        assert f"| {h.mean:.3f} | {h.low:.3f} | {h.high:.3f} |" in row
    assert "Paired differences against fake-a" in md and (out / "leaderboard.html").read_text().count("<svg") == 2
    logs = {c.key: (out / "cells" / c.key / "bench.log").stat().st_size for c in cells}
    again = run_sweep(spec, cells, out, say=lambda m: None)
    assert again.cells == res.cells  # same run folders, nothing re-run
    assert all(j.attempts == 1 for j in again.jobs)
    assert logs == {c.key: (out / "cells" / c.key / "bench.log").stat().st_size for c in cells}


def test_list_null_and_mapping_options_reach_each_cell_exactly(sweep_dir: Path) -> None:
    f = write(
        sweep_dir,
        "models: [fake-a]\nbenchmarks:\n  - {name: callnavi, options: {domains: [maps], task: routing}}\n"
        "  - {name: mapped, options: {domains: null, weights: {routing: {maps: [1, 0.5]}, note: null}}}\n"
        "limit: 1\nmodels_file: models.yaml\n",
    )
    spec, cells = load_sweep(f)
    res = run_sweep(spec, cells, sweep_dir / "out", say=lambda m: None)
    assert res.failed == [] and len(cells) == 2
    for entry, c in zip(spec.benchmarks, cells, strict=True):
        man = RunManifest.read(Path(res.cells[c.key] or ""))
        recorded = man.config.benchmarks[0].options
        assert man.status == "finished" and man.config.benchmarks[0].name == entry.name
        assert {k: recorded[k] for k in entry.options} == entry.options  # the values the file said, typed
    assert cells[1].options["weights"] == {"routing": {"maps": [1, 0.5]}, "note": None}


def test_a_cells_folder_name_is_the_hash_of_its_settings_as_earlier_rigs_wrote_them(sweep_dir: Path) -> None:
    """Cells found again by a later rig: the key hashes the same twelve settings, as the same JSON values, that a
    cell folder was named from before Cell became a RunSpec (the options, paths and unset overrides included)."""
    import hashlib
    import json

    data = sweep_dir / "cn"
    f = write(
        sweep_dir,
        "models: [fake-a]\nbenchmarks:\n  - {name: callnavi, data: cn, options: {domains: [maps], task: routing}}\n"
        # tool_mode given: without it decode json now runs tool mode json, as `rig bench --decode json` does
        "decode: [json]\ntool_mode: [prompt]\nrepeats: 2\nlimit: 3\nseed: 7\ntemperature: 0.5\n"
        "models_file: models.yaml\n",
    )
    data.mkdir()
    _, cells = load_sweep(f)
    before = {
        "model": "fake-a",
        "benchmark": "callnavi",
        "options": {"domains": ["maps"], "task": "routing"},
        "data": str(data.resolve()),
        "decode": "json",
        "tool_mode": "prompt",
        "repeats": 2,
        "limit": 3,
        "seed": 7,
        "max_tokens": None,
        "temperature": 0.5,
        "models_file": str((sweep_dir / "models.yaml").resolve()),
    }
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:10]
    assert [c.key for c in cells] == [f"fake-a-callnavi-json-prompt-{digest}"]
    spec = cells[0].spec(shard="1/2", gpu=0)
    assert type(spec).__name__ == "RunSpec" and spec.shard == "1/2" and spec.gpu == 0 and spec.seed == 7


@pytest.mark.parametrize("gpus,num_gpus,together", [("", 0, False), ("0,1", 0, False), ("0,1", 1, True)])
def test_local_cells_run_at_once_where_the_gpus_allow(
    sweep_dir: Path, monkeypatch: pytest.MonkeyPatch, gpus: str, num_gpus: int, together: bool
) -> None:
    # CPU-only (or cells asking no GPU): one cell at a time; two GPUs and one per cell: two at once, one GPU each
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", gpus)
    monkeypatch.setenv("FAKE_DELAY", "0.5")
    f = write(
        sweep_dir,
        "models: [fake-a, fake-b]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 3\n"
        f"models_file: models.yaml\nresources: {{num_gpus: {num_gpus}}}\n",
    )
    spec, cells = load_sweep(f)
    res = run_sweep(spec, cells, sweep_dir / "out", say=lambda m: None)
    assert res.failed == []
    spans = []
    for c in cells:
        man = RunManifest.read(Path(res.cells[c.key] or ""))
        assert man.finished_at is not None
        spans.append((man.started_at, man.finished_at))
    (a0, a1), (b0, b1) = spans
    assert (a0 < b1 and b0 < a1) == together, spans
    logs = [(sweep_dir / "out" / "cells" / c.key / "bench.log").read_text() for c in cells]
    seen = sorted(line.split("=", 1)[1] for log in logs for line in log.splitlines() if "CUDA_VISIBLE_DEVICES" in line)
    assert seen == (["0", "1"] if together else [gpus, gpus])


def test_killed_cell_is_retried_and_resumed_without_loss_or_repeat(
    sweep_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_DELAY", "0.4")
    f = write(
        sweep_dir,
        "models: [fake-a]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 6\n"
        "models_file: models.yaml\n",
    )
    spec, cells = load_sweep(f)
    out = sweep_dir / "out"
    jd = job_dir(out.resolve(), cells[0], 0, 1)
    killed: list[int] = []

    def killer() -> None:  # SIGKILL the cell's process once it has stored two episodes
        deadline = time.time() + 120
        while time.time() < deadline:
            run = run_folder(jd) if jd.exists() else None
            if run is not None and (run / "results.sqlite").exists() and len(stored(run)) >= 2:
                pid = JobState.model_validate_json((jd / "job.json").read_text()).pid
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    res = run_sweep(spec, cells, out, say=lambda m: None)
    t.join()
    assert killed, "the cell finished before it could be killed"
    job = res.jobs[0]
    assert job.status == "done" and job.attempts == 2 and job.resumed == 1
    assert "killed by signal 9" in job.errors[0]
    run = Path(res.cells[cells[0].key] or "")
    keys = stored(run)
    assert len(keys) == len(set(keys)) == 6  # every episode once: none lost, none run twice
    assert RunManifest.read(run).status == "finished"


def test_a_retry_waits_for_the_dead_attempts_process_to_let_go_of_the_run(sweep_dir: Path) -> None:
    # A killed Ray worker's cell process gets SIGTERM and finishes its engine call before it exits; the retry, started
    # at once, must wait for it rather than fail on the run lock (exit 2, which is never retried).
    f = write(sweep_dir, "models: [fake-a]\nbenchmarks: [callnavi]\nlimit: 2\nmodels_file: models.yaml\n")
    spec, cells = load_sweep(f)
    out = (sweep_dir / "out").resolve()
    run_sweep(spec, cells, out, say=lambda m: None)
    jd = job_dir(out, cells[0], 0, 1)
    run = run_folder(jd)
    assert run is not None
    before = stored(run)
    man = RunManifest.read(run)
    man.status = "interrupted"  # as the previous attempt leaves it once it exits
    man.write(run)
    held = RunLock(run)  # that process, still running
    releaser = threading.Timer(6.0, held.release)
    releaser.start()
    t0 = time.monotonic()
    try:
        a = attempt(cells[0], jd, 0, 1, 0)
    finally:
        releaser.cancel()
        held.release()
    assert a.returncode == 0 and a.finished, a.error
    assert time.monotonic() - t0 >= 6.0
    assert RunManifest.read(run).status == "finished" and stored(run) == before


def test_resuming_a_cell_whose_model_changed_is_refused_not_mixed(sweep_dir: Path) -> None:
    # The cell's folder name covers the sweep's fields, not the models.yaml entry: rig bench --resume checks the
    # run's config hash, and the cell fails (bad input: not retried) instead of mixing two models' results.
    f = write(sweep_dir, "models: [fake-a]\nbenchmarks: [callnavi]\nlimit: 2\nmodels_file: models.yaml\n")
    spec, cells = load_sweep(f)
    out = (sweep_dir / "out").resolve()
    run_sweep(spec, cells, out, say=lambda m: None)
    run = run_folder(job_dir(out, cells[0], 0, 1))
    assert run is not None
    before = stored(run)
    man = RunManifest.read(run)
    man.status = "interrupted"
    man.write(run)
    (sweep_dir / "models.yaml").write_text(MODELS.replace("context_length: 4096", "context_length: 2048", 1))
    spec, cells2 = load_sweep(f)
    assert cells2[0].key == cells[0].key
    res = run_sweep(spec, cells2, out, say=lambda m: None)
    job = res.jobs[0]
    assert job.status == "failed" and job.attempts == 2 and len(job.errors) == 1
    assert "exit 2" in job.errors[0] and "model.context_length: 4096 -> 2048" in job.errors[0]
    assert stored(run) == before and RunManifest.read(run).status == "interrupted"


def test_cell_that_keeps_dying_is_reported_and_the_sweep_goes_on(
    sweep_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CRASH_MODEL", "fake-b")
    f = write(
        sweep_dir,
        "models: [fake-b, fake-a]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\n"
        "limit: 1\nmax_retries: 1\nmodels_file: models.yaml\n",
    )
    spec, cells = load_sweep(f)
    res = run_sweep(spec, cells, sweep_dir / "out", say=lambda m: None)
    bad, good = res.jobs
    assert bad.status == "failed" and bad.attempts == 2 and all("killed by signal 9" in e for e in bad.errors)
    assert good.status == "done" and res.failed == [cells[0].key] and res.cells[cells[0].key] is None
    md = write_leaderboard(sweep_dir / "out", cells, res.cells, "fake-b")
    assert "### Failed cells" in md and cells[0].key in md.split("### Failed cells")[1]
    # re-running the sweep retries the failed cell afresh (the limit is per run), the finished one is left alone
    again = run_sweep(spec, cells, sweep_dir / "out", say=lambda m: None)
    assert again.jobs[0].status == "failed" and again.jobs[0].attempts == 4 and len(again.jobs[0].errors) == 2
    assert again.jobs[1].attempts == 1


def test_two_shards_merged_equal_one_run(sweep_dir: Path) -> None:
    body = "models: [fake-a]\nbenchmarks: [callnavi]\nlimit: 5\nrepeats: 2\nmodels_file: models.yaml\n"
    one = load_sweep(write(sweep_dir, body, "one.yaml"))
    two = load_sweep(write(sweep_dir, body + "shards: 2\n", "two.yaml"))
    r1 = run_sweep(*one, sweep_dir / "one", say=lambda m: None)
    r2 = run_sweep(*two, sweep_dir / "two", say=lambda m: None)
    assert [j.name.endswith(f"[{i}/2]") for i, j in enumerate(r2.jobs, 1)] == [True, True]
    single, merged = Path(r1.cells[one[1][0].key] or ""), Path(r2.cells[two[1][0].key] or "")
    shard_runs = [run_folder(job_dir(sweep_dir / "two", two[1][0], i, 2)) for i in range(2)]
    shard_keys = [set(stored(r)) for r in shard_runs if r is not None]
    assert len(shard_keys) == 2 and shard_keys[0] and shard_keys[1] and not shard_keys[0] & shard_keys[1]

    def per_episode(run: Path) -> dict:
        s = Store(run / "results.sqlite")
        try:
            return {
                (r.episode_id, r.repeat): (r.status, r.scores, [g.text for g in r.generations]) for r in s.results()
            }
        finally:
            s.close()

    a, b = per_episode(single), per_episode(merged)
    assert len(a) == 2 * len({e for e, _ in a}) and a == b
    ma, mb = RunManifest.read(single), RunManifest.read(merged)
    assert mb.config.shard is None and mb.config_hash == ma.config_hash  # the very configuration of a single run
    assert mb.spec is not None and mb.spec == ma.spec and mb.spec.shard is None  # and the settings of one
    from rig.render.report import report_markdown

    # the benchmark tables (all but the run's own timings) read the same
    ta, tb = report_markdown(single), report_markdown(merged)
    assert ta.split("| Measure |")[0].replace(ma.run_id, "") == tb.split("| Measure |")[0].replace(mb.run_id, "")


def test_merge_refuses_an_incomplete_set_of_shards(sweep_dir: Path) -> None:
    spec, cells = load_sweep(
        write(sweep_dir, "models: [fake-a]\nbenchmarks: [callnavi]\nlimit: 2\nshards: 2\nmodels_file: models.yaml\n")
    )
    run_sweep(spec, cells, sweep_dir / "out", say=lambda m: None)
    shard0 = run_folder(job_dir(sweep_dir / "out", cells[0], 0, 2))
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "merge", str(shard0), "--out", str(sweep_dir / "m")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "expected shards 0..0 of 2" not in r.stderr and "0..1 of 2" in r.stderr


def _two_shards(sweep_dir: Path) -> tuple[Path, Path]:
    spec, cells = load_sweep(
        write(sweep_dir, "models: [fake-a]\nbenchmarks: [callnavi]\nlimit: 4\nshards: 2\nmodels_file: models.yaml\n")
    )
    run_sweep(spec, cells, sweep_dir / "out", say=lambda m: None)
    shards = [run_folder(job_dir(sweep_dir / "out", cells[0], i, 2)) for i in (0, 1)]
    assert all(s is not None for s in shards)
    return shards[0], shards[1]  # type: ignore[return-value]


def test_merge_of_overlapping_shards_is_refused_naming_both(sweep_dir: Path) -> None:
    """An episode stored in two shards stopped `rig merge` with a traceback at the duplicate and left a half-merged
    run marked running (issue 37); it is refused before anything is written, naming both folders."""
    shard0, shard1 = _two_shards(sweep_dir)
    s0, s1 = Store(shard0 / "results.sqlite"), Store(shard1 / "results.sqlite")
    extra = s0.results()[0]
    s1.write(extra)
    s0.close()
    s1.close()
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "merge", str(shard0), str(shard1), "--out", str(sweep_dir / "m")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{extra.episode_id} repeat {extra.repeat} is stored in both {shard0} and {shard1}" in err, err
    assert not (sweep_dir / "m").exists()


def test_a_merge_stopped_midway_leaves_no_run(sweep_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop (or any error) while the merged results are written leaves nothing under --out that `rig runs` would
    list as running: the merge is built in a folder of its own and renamed when whole."""
    from rig.sweep.merge import merge_runs

    shard0, shard1 = _two_shards(sweep_dir)
    real = Store.write
    written: list[object] = []

    def stop_after_one(self: Store, res):  # type: ignore[no-untyped-def]
        if written:
            raise KeyboardInterrupt
        written.append(res)
        return real(self, res)

    monkeypatch.setattr(Store, "write", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        merge_runs([shard0, shard1], sweep_dir / "m")
    assert list((sweep_dir / "m").iterdir()) == []
    monkeypatch.setattr(Store, "write", real)
    merged = merge_runs([shard0, shard1], sweep_dir / "m")
    assert [p.name for p in (sweep_dir / "m").iterdir()] == [merged.name]
    assert RunManifest.read(merged).status == "finished"


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_merge_stopped_by_a_signal_leaves_no_run_and_the_rerun_completes(sweep_dir: Path, how: str) -> None:
    """A real `rig merge` process stopped by Ctrl-C or SIGTERM after its first result was written: exit 130 with a
    hint, nothing under --out (the half-merged folder is removed), and the same command then merges."""
    from tests.test_interrupt import stopped_midway

    shard0, shard1 = _two_shards(sweep_dir)
    out = sweep_dir / "m"
    args = ["merge", str(shard0), str(shard1), "--out", str(out)]
    r = stopped_midway(REPO, sweep_dir / "ready", "rig.runfolder.store:Store.write", args, how)
    assert r.returncode == 130, r.stderr
    assert f"interrupted: nothing merged under {out}; run the command again" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr and (not out.exists() or list(out.iterdir()) == [])
    again = subprocess.run([sys.executable, "-m", "rig.cli", *args], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    (merged,) = out.iterdir()
    assert RunManifest.read(merged).status == "finished"
    assert sorted(stored(merged)) == sorted(stored(shard0) + stored(shard1))
