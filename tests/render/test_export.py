import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rig.render.export import export, list_runs
from tests.render.test_report import make_run


def test_runs_and_exports(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    rows = list_runs(tmp_path)
    assert len(rows) == 1 and rows[0].done == rows[0].total == 32 and rows[0].status == "finished"
    j = [json.loads(line) for line in export(run_dir, "jsonl").read_text().splitlines()]
    assert len(j) == 32 and {"score_ast", "tag_difficulty", "e2e_s", "prompt_tokens"} <= set().union(*j)
    assert all(r["decode_tps"] is None for r in j)  # fake engine measured none: stays empty, not 0
    with export(run_dir, "csv").open() as f:
        c = list(csv.DictReader(f))
    assert len(c) == 32 and c[0]["model"] == "gemma3-270m"


def test_parquet_when_pyarrow_present(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    p = export(make_run(tmp_path), "parquet")
    assert pq.read_table(p).num_rows == 32


# A child that runs `rig export` and signals itself while the 10th row is being written: the row writers are wrapped
# so the signal lands mid-file, at the same point every time (a timer would race the export).
_INTERRUPTED_EXPORT = """
import csv, os, signal, sys
from rig.render import export as ex

sig = getattr(signal, sys.argv[3])
seen = [0]

def after_ten(write):
    def wrapped(*a, **k):
        seen[0] += 1
        if seen[0] == 10:
            os.kill(os.getpid(), sig)
        return write(*a, **k)
    return wrapped

csv.DictWriter._dict_to_list = after_ten(csv.DictWriter._dict_to_list)
ex.json.dumps = after_ten(ex.json.dumps)
from rig.cli import app
app(["export", sys.argv[1], "--format", sys.argv[2], "--out", sys.argv[4]])
"""


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_interrupted_export_leaves_no_short_file(tmp_path: Path, fmt: str, sig: str) -> None:
    """`rig export` stopped mid-file leaves no file under the final name, and an earlier complete export whole."""
    from tests.conftest import REPO

    run_dir = make_run(tmp_path)
    fresh, earlier = tmp_path / f"fresh.{fmt}", tmp_path / f"earlier.{fmt}"
    export(run_dir, fmt, earlier)
    before = earlier.read_bytes()
    for out in (fresh, earlier):
        cmd = [sys.executable, "-c", _INTERRUPTED_EXPORT, str(run_dir), fmt, sig, str(out)]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0, done.stdout  # the signal stopped it
    assert not fresh.exists()
    assert earlier.read_bytes() == before
    if sig == "SIGINT":  # an exception: the temporary file is removed (SIGTERM's default action leaves it, hidden)
        assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_export_write_error_names_the_output(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    with pytest.raises(OSError) as e:
        export(run_dir, "jsonl", tmp_path / "no-such-folder" / "x.jsonl")
    assert e.value.filename == str(tmp_path / "no-such-folder" / "x.jsonl")


def test_export_on_a_full_disk_names_the_output(tmp_path: Path) -> None:
    """A write that fails for want of space names the output file (the OSError of a failed write names none), and
    leaves nothing under that name."""
    import errno
    from unittest import mock

    run_dir = make_run(tmp_path)
    out = tmp_path / "x.csv"
    with (
        mock.patch("csv.DictWriter.writerows", side_effect=OSError(errno.ENOSPC, "No space left on device")),
        pytest.raises(OSError) as e,
    ):
        export(run_dir, "csv", out)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(out)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["r1"]


@pytest.mark.parametrize("table", ["classes", "episodes"])
def test_divergence_export_rows_equal_the_pass_csv(tmp_path: Path, table: str) -> None:
    from rig.analyses.divergence.output import export_divergence, write_report
    from tests.analyses.divergence.test_view import fake_report

    write_report(fake_report(), tmp_path)
    written = tmp_path / ("divergence.csv" if table == "classes" else "divergence_episodes.csv")
    with written.open() as f:
        want = list(csv.DictReader(f))
    assert want
    with export_divergence(tmp_path, table, "csv").open() as f:
        got = list(csv.DictReader(f))
    assert got == want and list(got[0]) == list(want[0])
    j = [json.loads(line) for line in export_divergence(tmp_path, table, "jsonl").read_text().splitlines()]
    assert [{k: "" if v is None else str(v) for k, v in r.items()} for r in j] == want  # null = not measured


def test_divergence_export_cli(tmp_path: Path) -> None:
    from rig.analyses.divergence.output import write_report
    from tests.analyses.divergence.test_view import fake_report

    write_report(fake_report(), tmp_path)

    def rig(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "rig.cli", *args], capture_output=True, text=True, timeout=120)

    p = rig("export", str(tmp_path), "--divergence", "episodes", "--format", "jsonl")
    assert p.returncode == 0, p.stderr
    assert len((tmp_path / "divergence-episodes.jsonl").read_text().splitlines()) == 8
    p = rig("export", str(tmp_path))  # a comparison folder without --divergence: refused, with the hint
    assert p.returncode == 2 and "--divergence classes or episodes" in p.stderr
    p = rig("export", str(tmp_path), "--divergence", "tokens")
    assert p.returncode == 2 and "choose classes or episodes" in p.stderr
    p = rig("export", str(tmp_path / "nothing"), "--divergence", "classes")
    assert p.returncode == 2 and "no divergence.json" in p.stderr


@pytest.mark.parametrize(
    "content,says",
    [
        (b'{"format_version": 1, "classes": [', "divergence.json: not valid JSON"),
        (b"\x00\xff", "divergence.json: not UTF-8 text"),
        (b'{"format_version": 1}', "divergence.json: settings: Field required"),
        (b"[]", "divergence.json: the whole file: Input should be an object"),  # no field to name
    ],
)
def test_divergence_export_of_a_damaged_file_names_it_and_writes_nothing(
    tmp_path: Path, content: bytes, says: str
) -> None:
    from rig.analyses.divergence.output import export_divergence

    (tmp_path / "divergence.json").write_bytes(content)
    with pytest.raises(ValueError, match=says):
        export_divergence(tmp_path, "classes", "csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["divergence.json"]


def make_repeat_run(tmp_path: Path, repeats: int, temperature: float, n_eps: int = 6, salt: str = "") -> Path:
    """A CallNavi run of ``repeats`` trials per episode whose fake engine answers right or wrong by the repeat's seed
    and the question, so episodes succeed on some trials and not others."""
    import asyncio
    import hashlib

    from rig.benchmarks.base import RunContext
    from rig.execution.runner import plan, run_items
    from rig.records import Sampling
    from rig.runfolder.manifest import RunManifest, host_info
    from rig.runfolder.store import Store
    from rig.telemetry.gpu import GpuMemorySummary
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine
    from tests.render.test_report import _build_fake

    _spec, _w, bench, eps, cfg = _build_fake(n_eps)
    cfg = cfg.model_copy(update={"repeats": repeats, "temperature": temperature})
    right = oracle(bench)

    def answer(req):  # type: ignore[no-untyped-def]
        digest = hashlib.sha256(f"{salt}{req.sampling.seed}:{req.messages[-1].content}".encode()).digest()
        return right(req) if digest[0] % 3 else "no answer here"

    run_dir = tmp_path / f"rk{salt}"
    run_dir.mkdir()
    store = Store(run_dir / "results.sqlite")
    ctx = RunContext(sampling=Sampling(temperature=temperature, seed=0))
    asyncio.run(run_items(plan([(bench, eps)], repeats), FakeEngine(answer), store, ctx))
    store.close()
    RunManifest(
        run_id=f"rk{salt}",
        config_hash=cfg.digest(),
        config=cfg,
        host=host_info(),
        started_at=0.0,
        status="finished",
        gpu_memory=GpuMemorySummary(available=False, reason="no --gpu given (CPU run)"),
    ).write(run_dir)
    return run_dir


def test_pass_k_recomputed_from_the_jsonl_export_equals_the_reported_value(tmp_path: Path) -> None:
    """Each repeat's seed and success are in `rig export --format jsonl`; pass^k and pass@k computed from those rows
    alone (C(c,k)/C(n,k) per episode, averaged) are the numbers report.md prints."""
    from math import comb

    from typer.testing import CliRunner

    from rig.cli import app
    from rig.render.report import report_markdown
    from rig.runfolder.folder import RunFolder

    run_dir = make_repeat_run(tmp_path, repeats=5, temperature=0.7)
    out = tmp_path / "e.jsonl"
    r = CliRunner().invoke(app, ["export", str(run_dir), "--format", "jsonl", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted({row["seed"] for row in rows}) == [0, 1, 2, 3, 4]  # each repeat's own seed
    trials: dict[str, list[bool]] = {}
    for row in rows:
        trials.setdefault(row["episode_id"], []).append(row["success"])
    assert any(0 < sum(t) < len(t) for t in trials.values())  # some episodes pass on some trials only
    reported = {p.k: p for p in RunFolder(run_dir).summary("callnavi").reliability.rows}  # type: ignore[union-attr]
    assert sorted(reported) == [1, 3, 5]
    md = report_markdown(run_dir)
    for k, p in reported.items():
        hat = sum(comb(sum(t), k) / comb(len(t), k) for t in trials.values()) / len(trials)
        at = sum(1 - comb(len(t) - sum(t), k) / comb(len(t), k) for t in trials.values()) / len(trials)
        assert p.pass_hat == pytest.approx(hat) and p.pass_at == pytest.approx(at)
        assert f"| k = {k} | {len(trials)} | {hat:.3f} [" in md
    failed = [row for row in rows if row["success"] is False]
    assert failed and all(row["failure_class"] and row["failure_detail"] for row in failed)
    assert all(row["failure_class"] is None for row in rows if row["success"])
