"""rig results on a real MLflow tracking server (`mlflow server`, sqlite, on loopback), read back through MLflow's
own client: a real run of the embedded model, a comparison's nested runs, a repeated export that changes nothing,
a server that is down or answers 500 (nothing lost, a later export completes), and the allowlist under `unshare -n`.
"""

from __future__ import annotations

import csv
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from rig.cli import app
from rig.engines.server import free_port
from rig.integrations import mlflow as mx
from rig.render.report import report_markdown
from rig.runfolder.folder import RunFolder
from rig.runfolder.manifest import RunManifest
from tests.integrations.mlflow_server import SERVER_START_S, start_server, stop_server
from tests.sweep import test_sweep_ray


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("mlflow")
    proc, uri = start_server(root)
    try:
        yield uri
    finally:
        stop_server(proc)


cluster = test_sweep_ray.cluster  # the loopback Ray cluster fixture of the sweep tests

FIVE = Path(__file__).parents[1] / "fixtures" / "run_before_issue17"  # a real five-benchmark run of the embedded model


@pytest.fixture(scope="module")
def bench_run(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded five-benchmark run of the embedded model, its report.md and report.html written by `rig report`,
    logged with `rig export RUN --mlflow URI`. (A fresh `rig bench` run took over 18 minutes for one CallNavi
    episode on the shared test host, so the suite uses the recorded one.)"""
    pytest.importorskip("matplotlib")
    run = tmp_path_factory.mktemp("runs") / FIVE.name
    shutil.copytree(FIVE, run)
    r = CliRunner().invoke(app, ["report", str(run), "--html", "--no-md"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    (run / "report.md").write_text(report_markdown(run))
    r = CliRunner().invoke(app, ["export", str(run), "--mlflow", server], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert f"mlflow: logged to {server}/#/experiments/" in r.output.replace("\n", "")
    return run


def test_bench_refuses_a_tracking_host_outside_the_allowlist_before_running(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["bench", "--out", str(tmp_path), "--mlflow", "http://192.0.2.5:5000"])
    assert r.exit_code == 2
    assert "refused outbound traffic to '192.0.2.5' port 5000" in " ".join(r.output.split())
    assert not list(tmp_path.iterdir())  # refused before any run folder was made


def the_run(client: MlflowClient, run_id: str, experiment: str = "rig") -> Any:
    exp = client.get_experiment_by_name(experiment)
    found = client.search_runs([exp.experiment_id], filter_string=f"tags.`rig.run_id` = '{run_id}'")
    assert len(found) == 1, [r.info.run_id for r in found]
    return found[0]


def report_cells(report: str, benchmark: str) -> dict[tuple[str, str, str], str]:
    """Every number of the benchmark's section of report.md: (table title, row label, column) -> the printed text."""
    section = report.split(f"## {benchmark} ", 1)[1].split("\n## ", 1)[0]
    out = {}
    for block in section.split("### ")[1:]:
        lines = block.splitlines()
        title, rows = lines[0].strip(), [ln for ln in lines if ln.startswith("|")]
        columns = [c.strip() for c in rows[0].strip("|").split("|")]
        for row in rows[2:]:
            cells = [c.strip() for c in row.strip("|").split("|")]
            label = "/".join(c for c in cells if c not in ("", "–") and not re.fullmatch(r"-?\d+(\.\d+)?", c))
            for col, cell in zip(columns, cells, strict=True):
                if re.fullmatch(r"-?\d+(\.\d+)?", cell):
                    out[(title, label, col)] = cell
    return out


def printed(v: float, text: str) -> str:
    """The metric as report.md printed the cell: to as many decimals as the cell shows."""
    return f"{v:.{len(text.split('.')[1])}f}" if "." in text else str(int(v))


def test_a_bench_run_reads_back_with_report_values_and_identical_artifacts(bench_run: Path, server: str) -> None:
    client = MlflowClient(server)
    folder = RunFolder(bench_run)
    man = folder.manifest
    run = the_run(client, man.run_id)
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED" and t["mlflow.runName"] == man.run_id
    # params: the RunSpec and the model's facts
    assert p["spec.model"] == "gemma3-270m" and p["spec.decode"] == man.config.decode
    assert p["model.engine"] == "llamacpp" and p["model.quantization"] == man.config.model.quantization
    assert p["rig.version"] == man.rig_version and p["host.hostname"] == man.host.hostname
    assert p["benchmark.callnavi.data_hash"] == folder.benchmarks[0].data_hash
    # every number of the paper tables, as report.md prints it, for every benchmark
    report = (bench_run / "report.md").read_text()
    checked = 0
    for b in folder.benchmarks:
        cells = report_cells(report, b.name)
        # the RunSummary's own tables go as their own metrics (headline, latency, energy; pass^k, failures_<class>)
        summary = ("Headline", "Latency", "Energy", "Reliability over repeats", "Failure taxonomy")
        tables = {k: v for k, v in cells.items() if not k[0].startswith(summary)}
        for (title, label, col), text in cells.items():
            if title.startswith("Failure taxonomy") and col == "Episodes":
                assert m[f"{b.name}/failures_{label.split('/')[0]}"] == int(text), (b.name, label, text)
                checked += 1
        for (title, label, col), text in tables.items():
            key = mx.metric_key(b.name, "table", title, *label.split("/"), col)
            assert key in m, (key, sorted(m)[:20])
            assert printed(m[key], text) == text, (key, m[key], text)
            checked += 1
    assert checked >= 40
    cells = report_cells(report, "callnavi")
    # the headline with its CI and the latency rows of report.md
    (ci,) = [v for k, v in cells.items() if k[0].startswith("Headline") and k[2] == "Mean"]
    assert printed(m["callnavi/headline"], ci) == ci
    for col, metric in (("CI low", "headline_ci_low"), ("CI high", "headline_ci_high")):
        (text,) = [v for k, v in cells.items() if k[0].startswith("Headline") and k[2] == col]
        assert printed(m[f"callnavi/{metric}"], text) == text
    p50, p95 = re.search(r"End-to-end latency p50 / p95 \(s\) \| ([\d.]+) / ([\d.]+)", report).groups()
    assert f"{m['callnavi/e2e_p50_s']:.3f}" == p50 and f"{m['callnavi/e2e_p95_s']:.3f}" == p95
    assert "callnavi/ttft_p50_s" in m and "callnavi/decode_tps_median" in m and "callnavi/peak_rss_bytes" in m
    # not measured on a CPU run: no metric (never a 0), a tag saying why
    assert "callnavi/gpu_peak_bytes" not in m
    assert t["rig.not_measured.callnavi/gpu_peak_bytes"] == folder.summary("callnavi").gpu_unavailable
    if folder.summary("callnavi").efficiency.mbu is None:
        assert "callnavi/decode_mbu" not in m and t["rig.not_measured.callnavi/decode_mbu"]
    # per-episode scores as step metrics, one step per stored episode
    results = folder.results("callnavi")
    history = client.get_metric_history(run.info.run_id, "callnavi/episode/ast")
    assert sorted((h.step, h.value) for h in history) == [
        (i, r.scores["ast"]) for i, r in enumerate(results) if r.scores.get("ast") is not None
    ]
    # artifacts byte for byte
    dst = bench_run.parent / "downloaded"
    names = ["report.md", "report.html", "manifest.json"]
    names += [f"figures/{f.name}" for f in sorted((bench_run / "figures").glob("*"))]
    for name in names:
        got = Path(client.download_artifacts(run.info.run_id, name, str(dst)))
        assert got.read_bytes() == (bench_run / name).read_bytes(), name
    episodes = Path(client.download_artifacts(run.info.run_id, "episodes.csv", str(dst)))
    with episodes.open(newline="", encoding="utf-8") as f:
        assert len(list(csv.DictReader(f))) == len(folder.results())


def snapshot(client: MlflowClient, experiment: str = "rig") -> dict[str, Any]:
    """Everything an export could change on the server: every run's params, metrics (whole histories), tags,
    status, end time and artifact listing."""
    exp = client.get_experiment_by_name(experiment)
    out: dict[str, Any] = {}
    for r in client.search_runs([exp.experiment_id], max_results=1000):
        rid = r.info.run_id
        histories = {
            k: [(h.step, h.value, h.timestamp) for h in client.get_metric_history(rid, k)] for k in r.data.metrics
        }

        def listing(path: str | None = None, rid: str = rid) -> list[tuple[str, int | None]]:
            found = []
            for a in client.list_artifacts(rid, path):
                found += listing(a.path) if a.is_dir else [(a.path, a.file_size)]
            return found

        out[rid] = (r.data.params, histories, r.data.tags, r.info.status, r.info.end_time, listing())
    return out


def test_a_second_export_changes_nothing(bench_run: Path, server: str) -> None:
    client = MlflowClient(server)
    before = snapshot(client)
    result = mx.export_run(bench_run, server)
    assert not result.changed
    assert snapshot(client) == before


def folder_state(d: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_server_that_is_down_is_named_and_nothing_is_lost(bench_run: Path) -> None:
    state = folder_state(bench_run)
    down = f"http://127.0.0.1:{free_port()}"
    r = CliRunner().invoke(app, ["export", str(bench_run), "--mlflow", down], catch_exceptions=False)
    assert r.exit_code == 2
    text = " ".join(r.output.split())
    assert f"MLflow at {down}" in text and "The run folder is unchanged" in text and "resumes" in text
    assert folder_state(bench_run) == state


class Proxy:
    """Forwards requests to the real server until ``budget`` of them passed, then answers HTTP 500 to all. With
    ``hold``, the first request whose path contains it is held (``held`` is set) until ``release()``, then answered
    500 without being forwarded: an upload that never completes."""

    def __init__(self, target: str, budget: int = 1 << 30, hold: str | None = None) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.budget = budget
        self.held, self.released = threading.Event(), threading.Event()

        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_a: Any) -> None:
                pass

            def _fail(self) -> None:
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if hold is not None and hold in self.path and not proxy.held.is_set():
                    proxy.held.set()
                    proxy.released.wait(120)
                    self._fail()
                    return
                if proxy.budget <= 0:
                    self._fail()
                    return
                proxy.budget -= 1
                c = http.client.HTTPConnection(host, int(port), timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "transfer-encoding")}
                c.request(self.command, self.path, body=body, headers=headers)
                resp = c.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def same_content(client: MlflowClient, a: Any, b: Any) -> None:
    """Two MLflow runs of the same rig run hold the same params, metrics, rig tags and artifacts."""
    assert a.data.params == b.data.params
    assert a.data.metrics == b.data.metrics
    assert {k: v for k, v in a.data.tags.items() if k.startswith("rig.")} == {
        k: v for k, v in b.data.tags.items() if k.startswith("rig.")
    }
    listing = [sorted((f.path, f.file_size) for f in client.list_artifacts(r.info.run_id)) for r in (a, b)]
    assert listing[0] == listing[1]


def test_an_export_cut_by_http_500_resumes_into_the_same_run(bench_run: Path, server: str) -> None:
    """The server answers 500 part-way (after the run was created and some of it sent): a clear error, the run
    folder untouched; the next export completes the same MLflow run, which then holds exactly what a clean export
    sends."""
    state = folder_state(bench_run)
    proxy = Proxy(server, budget=8)
    try:
        with pytest.raises(mx.MlflowExportError, match=r"MLflow at http://127\.0\.0\.1:\d+: exporting .*500"):
            mx.export_run(bench_run, proxy.uri, experiment="cut")
    finally:
        proxy.close()
    assert folder_state(bench_run) == state
    client = MlflowClient(server)
    man = RunFolder(bench_run).manifest
    partial = the_run(client, man.run_id, "cut")
    assert partial.info.status == "RUNNING"  # created, never finished
    result = mx.export_run(bench_run, server, experiment="cut")
    assert result.changed and result.mlflow_run_id == partial.info.run_id
    done = the_run(client, man.run_id, "cut")
    clean = the_run(client, man.run_id, "rig")  # the bench run's own, uninterrupted export
    assert done.info.status == "FINISHED"
    same_content(client, done, clean)


def test_a_signal_mid_upload_exits_130_and_the_rerun_completes_the_same_run(bench_run: Path, server: str) -> None:
    """SIGINT to a real `rig export RUN --mlflow URI` while the server takes an artifact upload and never answers:
    exit 130 with the hint, no traceback, the run folder untouched; the same export again finishes that MLflow run
    (one run with the key, never a second) with what an uninterrupted export sends."""
    state = folder_state(bench_run)
    proxy = Proxy(server, hold="/mlflow-artifacts/artifacts/")
    cmd = [sys.executable, "-m", "rig.cli", "export", str(bench_run), "--mlflow", proxy.uri]
    cmd += ["--mlflow-experiment", "signal"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proxy.held.wait(SERVER_START_S), "the export never reached an artifact upload"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proxy.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = " ".join(out.split())
    assert proc.returncode == 130, out
    assert "Traceback" not in out
    assert f"interrupted: the MLflow export stopped part-way; {bench_run} is unchanged" in text, text
    assert f"`rig export {bench_run} --mlflow {proxy.uri}` completes the same MLflow run" in text
    assert folder_state(bench_run) == state
    client = MlflowClient(server)
    man = RunFolder(bench_run).manifest
    partial = the_run(client, man.run_id, "signal")
    assert partial.info.status == "RUNNING" and not client.list_artifacts(partial.info.run_id)
    result = mx.export_run(bench_run, server, experiment="signal")
    assert result.changed and result.mlflow_run_id == partial.info.run_id
    done = the_run(client, man.run_id, "signal")  # exactly one run carries the key
    assert done.info.status == "FINISHED"
    same_content(client, done, the_run(client, man.run_id, "rig"))


def test_a_comparison_is_a_parent_run_with_nested_variants(server: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from rig.analyses.compare import variant_labels
    from tests.render.test_report import make_run

    bench_run = make_run(tmp_path / "a", n_eps=4)
    other = make_run(tmp_path / "b", n_eps=4)
    man = RunManifest.read(other)
    man.run_id = "r2"
    man.config.decode = "json"
    man.write(other)
    r = CliRunner().invoke(
        app,
        ["compare", "--run", str(bench_run), "--run", str(other), "--out", str(tmp_path), "--mlflow", server],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    (cdir,) = tmp_path.glob("compare-*")
    client = MlflowClient(server)
    exp = client.get_experiment_by_name("rig")
    (parent,) = client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`rig.group_id` = '{cdir.name}' and tags.`rig.kind` = 'compare'"
    )
    children = client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert sorted(c.data.tags["rig.run_id"] for c in children) == sorted(
        [man.run_id, RunFolder(bench_run).manifest.run_id]
    )
    assert sorted(c.data.tags["mlflow.runName"] for c in children) == sorted(variant_labels([bench_run, other]))
    assert all(c.data.tags["rig.group_id"] == cdir.name for c in children)
    got = Path(client.download_artifacts(parent.info.run_id, "compare.md", str(tmp_path / "dl")))
    assert got.read_bytes() == (cdir / "compare.md").read_bytes()
    # the same comparison exported again: nothing changes
    before = snapshot(client)
    r = CliRunner().invoke(app, ["export", str(cdir), "--mlflow", server], catch_exceptions=False)
    assert r.exit_code == 0 and "already up to date" in r.output, r.output
    assert snapshot(client) == before


_WAIT = (
    "import sys, time, urllib.request\n"
    "for _ in range(360):\n"
    "    try:\n"
    "        urllib.request.urlopen(sys.argv[1], timeout=2); break\n"
    "    except OSError:\n"
    "        time.sleep(0.5)\n"
)
_NETNS = """
set -e
ip link set lo up
ip addr add 198.51.100.7/32 dev lo
"""


def test_the_guard_refuses_a_host_outside_the_allowlist_and_lets_an_allowed_one_through_inside_unshare(
    bench_run: Path, tmp_path: Path
) -> None:
    """Inside `unshare -n` a tracking server on a lab address (198.51.100.7, not loopback): without --allow-host
    the export is refused by the guard, naming the host, before any connection (the server logs no request); with
    it, the run reaches the server."""
    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("unshare -n is not allowed on this machine")
    port = free_port()
    lab = f"http://198.51.100.7:{port}"
    script = tmp_path / "inside.sh"
    rig = [sys.executable, "-m", "rig.cli", "export", str(bench_run), "--mlflow", lab]
    script.write_text(
        _NETNS
        + f"{sys.executable} -m mlflow server --backend-store-uri sqlite:///{tmp_path}/m.db --artifacts-destination "
        f"{tmp_path}/art --host 198.51.100.7 --port {port} --allowed-hosts 198.51.100.7:{port} --workers 1 "
        f"> {tmp_path}/server.log 2>&1 &\n"
        + "SERVER=$!\n"
        + f"{sys.executable} -c '{_WAIT}' {lab}/health\n"
        + f"before=$(wc -l < {tmp_path}/server.log)\n"
        + f"{' '.join(rig)} > {tmp_path}/refused.out 2>&1 && echo refused-rc=0 || echo refused-rc=$?\n"
        + f"echo server-lines-during-refused=$(( $(wc -l < {tmp_path}/server.log) - before ))\n"
        + f"{' '.join(rig)} --allow-host 198.51.100.7:{port} > {tmp_path}/allowed.out 2>&1 && echo allowed-rc=0 "
        "|| echo allowed-rc=$?\n" + "kill $SERVER; wait $SERVER || true\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "RIG_ALLOW_HOSTS": ""}
    out = subprocess.run(["unshare", "-n", "bash", str(script)], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    refused = " ".join((tmp_path / "refused.out").read_text().split())
    assert "refused-rc=2" in out.stdout, refused
    assert f"--mlflow '{lab}': rig is offline: refused outbound traffic to '198.51.100.7' port {port}" in refused
    assert "allowed-rc=0" in out.stdout, (tmp_path / "allowed.out").read_text()
    assert "mlflow: logged to" in (tmp_path / "allowed.out").read_text()
    assert "server-lines-during-refused=0" in out.stdout  # the refused export never reached the server
    assert '"POST /api' in (tmp_path / "server.log").read_text()  # the allowed one did


def test_a_rig_run_record_is_computed_from_the_folder_alone(bench_run: Path, tmp_path: Path) -> None:
    """Without any server: params are text within MLflow's limits, keys are valid MLflow names, nothing measured is
    ever a 0 standing in for 'not measured'."""
    rec = mx.run_record(RunFolder(bench_run), tmp_path)
    assert all(len(v) <= mx.MAX_PARAM_VALUE for v in rec.params.values())
    for key in [*rec.params, *rec.metrics, *rec.tags]:
        assert len(key) <= mx.MAX_KEY and re.fullmatch(r"[\w\-. /:]+", key) and "//" not in key, key
    assert not set(rec.metrics) & {k.removeprefix(mx.NOT_MEASURED) for k in rec.tags if k.startswith(mx.NOT_MEASURED)}
    assert (
        hashlib.sha256((bench_run / "report.md").read_bytes()).hexdigest()
        == hashlib.sha256(rec.artifacts["report.md"].read_bytes()).hexdigest()
    )
    assert json.loads((bench_run / "manifest.json").read_text())["run_id"] == rec.tags["rig.run_id"]
    # the weights' sha256: a param when the manifest records it, else a tag saying why not
    assert (
        "weights_sha256" not in rec.params
        and "written before rig hashed" in rec.tags[mx.NOT_MEASURED + "weights_sha256"]
    )
    copy = tmp_path / "hashed"
    shutil.copytree(bench_run, copy)
    man = RunManifest.read(copy)
    man.weights_sha256 = "c" * 64
    man.write(copy)
    rec = mx.run_record(RunFolder(copy), tmp_path / "files")
    assert rec.params["weights_sha256"] == "c" * 64 and mx.NOT_MEASURED + "weights_sha256" not in rec.tags


# -- end to end: `rig bench`, `rig load` and `rig sweep` with --mlflow --------------------------------------------


def group_runs(client: MlflowClient, kind: str, group_id: str) -> tuple[Any, list[Any]]:
    exp = client.get_experiment_by_name("rig")
    where = f"tags.`rig.group_id` = '{group_id}' and tags.`rig.kind` = '{kind}'"
    (parent,) = client.search_runs([exp.experiment_id], filter_string=where)
    children = client.search_runs(
        [exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    return parent, children


def same_as_report(m: dict[str, float], run: Path, benchmark: str) -> int:
    """Every number of the benchmark's section of the run's report.md (as `rig report` writes it) equals its
    metric, to the printed decimals; the count checked."""
    from rig.benchmarks import benchmark_tables

    report = (run / "report.md").read_text() if (run / "report.md").is_file() else report_markdown(run)
    cells = report_cells(report, benchmark)
    folder = RunFolder(run)
    paper = {
        t.title
        for t in benchmark_tables(
            folder.benchmark(benchmark), folder.results(benchmark), folder.manifest.config.model.name
        )
    }
    checked = 0
    for (title, label, col), text in cells.items():
        if title.startswith("Headline"):
            key = {"Mean": "headline", "CI low": "headline_ci_low", "CI high": "headline_ci_high"}.get(col)
            if key is None:
                continue
            key = f"{benchmark}/{key}"
        elif title not in paper:  # the report's own sections (latency, energy, call forms): summary metrics
            continue
        else:
            key = mx.metric_key(benchmark, "table", title, *label.split("/"), col)
        assert key in m, (key, sorted(m)[:30])
        assert printed(m[key], text) == text, (key, m[key], text)
        checked += 1
    return checked


@pytest.mark.model
def test_rig_bench_mlflow_logs_a_real_run_of_the_embedded_model(server: str, tmp_path: Path) -> None:
    """`rig bench --mlflow` on the embedded gemma3-270m (one RouteEval episode): the run it logs holds report.md's
    numbers, the weights' sha256 the manifest recorded, and report.md byte for byte."""
    cmd = [sys.executable, "-m", "rig.cli", "bench", "-m", "gemma3-270m", "-b", "routeeval", "--limit", "1"]
    cmd += ["--max-tokens", "32", "--out", str(tmp_path / "runs"), "--mlflow", server]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RIG_CACHE": str(tmp_path / "cache")}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "mlflow: logged to" in " ".join((r.stdout + r.stderr).split())  # said on stderr, beside the screen
    (run,) = (tmp_path / "runs").iterdir()
    man = RunFolder(run).manifest
    assert man.weights_sha256 is not None and re.fullmatch(r"[0-9a-f]{64}", man.weights_sha256)
    client = MlflowClient(server)
    got = the_run(client, man.run_id)
    assert got.data.params["weights_sha256"] == man.weights_sha256
    assert got.data.params["spec.limit"] == "1" and got.data.params["spec.benchmark"] == "routeeval"
    assert same_as_report(got.data.metrics, run, "routeeval") >= 3
    dl = Path(client.download_artifacts(got.info.run_id, "report.md", str(tmp_path / "dl")))
    assert dl.read_bytes() == (run / "report.md").read_bytes()


def test_rig_load_mlflow_logs_a_parent_with_a_nested_run_per_level(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rig load --concurrency 1,2 --mlflow`: a parent run (the verdict, load.md) with one nested run per level,
    each holding its level run's report numbers. The level processes are stood in for as in the load tests (the
    fake engine cannot cross a process)."""
    import rig.analyses.load.run as load
    from tests.analyses.load.test_load import _stand_in_levels

    _calls, child = _stand_in_levels(tmp_path, {})
    monkeypatch.setattr(load, "run_child", child)
    monkeypatch.setattr(load, "_check", lambda _s: None)
    argv = ["load", "-m", "gemma3-270m", "-b", "callnavi", "--concurrency", "1,2", "--out", str(tmp_path / "out")]
    r = CliRunner().invoke(app, [*argv, "--mlflow", server], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "with 2 nested runs" in " ".join(r.output.split())
    (ldir,) = (tmp_path / "out").glob("load-*")
    parent, children = group_runs(MlflowClient(server), "load", ldir.name)
    verdict = json.loads((ldir / "load.json").read_text())["verdict"]["level"]
    assert parent.data.metrics.get("load/verdict_level") == (None if verdict is None else float(verdict))
    assert parent.data.params["load.levels"] == "1,2"
    assert sorted(c.data.tags["mlflow.runName"] for c in children) == ["concurrency 1", "concurrency 2"]
    for c in children:
        run = ldir / "runs" / c.data.tags["rig.run_id"].split("/")[-1]
        assert run.is_dir() and RunFolder(run).manifest.concurrency == int(c.data.tags["mlflow.runName"].split()[-1])
        assert same_as_report(c.data.metrics, run, "callnavi") >= 3


def test_rig_sweep_mlflow_on_a_local_ray_cluster_logs_a_nested_run_per_cell(
    server: str, cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rig sweep --ray ADDRESS --mlflow` (two cells, the fake engine in their processes on a loopback Ray
    cluster): a parent run with the leaderboard and one nested run per cell, each with its cell run's numbers."""
    from rig import plugins
    from tests.sweep.conftest import install_cell_plugins

    install_cell_plugins(monkeypatch)  # the fake engine, which the sweep file's models name
    try:
        _sweep_to_mlflow(server, cluster, tmp_path)
    finally:  # the plugins leave with the monkeypatched path: so must what discovery cached of them
        plugins.discover.cache_clear()


def _sweep_to_mlflow(server: str, cluster: str, tmp_path: Path) -> None:
    from rig.sweep.run import run_folder
    from rig.sweep.spec import load_sweep
    from tests.sweep.test_sweep import MODELS, write
    from tests.sweep.test_sweep_ray import rig_sweep

    (tmp_path / "fake.gguf").write_bytes(b"GGUF")
    (tmp_path / "models.yaml").write_text(MODELS)
    f = write(
        tmp_path,
        "models: [fake-a, fake-b]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 2\n"
        "models_file: models.yaml\nresources: {num_cpus: 1}\n",
    )
    out = tmp_path / "out"
    r = rig_sweep(f, out, "--ray", cluster, "--mlflow", server)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    parent, children = group_runs(MlflowClient(server), "sweep", out.name)
    _, cells = load_sweep(f)
    assert sorted(c.data.tags["mlflow.runName"] for c in children) == sorted(c.key for c in cells)
    assert parent.data.params["sweep.cells"] == "2"
    got = Path(MlflowClient(server).download_artifacts(parent.info.run_id, "leaderboard.md", str(tmp_path / "dl")))
    assert got.read_bytes() == (out / "leaderboard.md").read_bytes()
    for c in children:
        run = run_folder(out / "cells" / c.data.tags["mlflow.runName"])
        assert run is not None and RunFolder(run).manifest.run_id == c.data.tags["rig.run_id"].split("/")[-1]
        assert same_as_report(c.data.metrics, run, "callnavi") >= 3
