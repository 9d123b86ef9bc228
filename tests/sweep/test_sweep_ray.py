"""rig sweep on a Ray cluster started as a user starts one (`ray start --head --node-ip-address 127.0.0.1`), joined
with `--ray ADDRESS`; cells run the fake engine (tests/sweep/fake_cell.py, a plugin), so the Ray path itself is what
is tested: tasks, a worker killed mid-cell, run folders shipped back to the driver."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.runfolder.manifest import RunManifest
from rig.sweep.run import JobState, job_dir, run_folder
from rig.sweep.spec import load_sweep
from tests.conftest import REPO
from tests.sweep.conftest import plugin_path
from tests.sweep.test_sweep import MODELS, stored, write

# The test's own loopback cluster: no token (Ray keeps one in the user's home, shared by every cluster there).
# The cells' processes inherit the cluster's environment, not the driver's: FAKE_DELAY is set where Ray starts.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    pytest.importorskip("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = tempfile.mkdtemp(prefix="rigray")  # short: Ray's socket paths live under it
    log = Path(tmp) / "start.log"
    with open(log, "wb") as out:
        argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address", "127.0.0.1"]
        argv += ["--port", str(port), "--num-cpus", "2", "--include-dashboard", "false", "--disable-usage-stats"]
        argv += ["--num-gpus", "2"]  # declared, not real: Ray hands them out to tasks as CUDA_VISIBLE_DEVICES
        proc = subprocess.Popen(
            [*argv, "--temp-dir", tmp, "--block"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ | RAY_ENV | {"FAKE_DELAY": "0.4", "PYTHONPATH": plugin_path()},
        )
    try:
        deadline = time.time() + 120
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.time() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()  # `ray start --block` stops the processes it started
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    (tmp_path / "fake.gguf").write_bytes(b"GGUF")
    (tmp_path / "models.yaml").write_text(MODELS)
    return tmp_path


def rig_sweep(f: Path, out: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`rig sweep` as a user runs it (with the fake engine in its cells), from the repository."""
    return subprocess.run(
        [sys.executable, "-m", "rig.cli", "sweep", str(f), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=os.environ | RAY_ENV | {"PYTHONPATH": plugin_path()} | (env or {}),
    )


@pytest.mark.parametrize("how", ["address", "auto"])
def test_sweep_joins_a_running_cluster(cluster: str, sweep_dir: Path, how: str) -> None:
    f = write(
        sweep_dir,
        "models: [fake-a, fake-b]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 2\n"
        "models_file: models.yaml\nresources: {num_cpus: 1}\n",
    )
    out = sweep_dir / "out"
    if how == "address":
        r = rig_sweep(f, out, "--ray", cluster)
    else:  # as on a cluster node, where RAY_ADDRESS (or `ray start`'s own record) names the cluster
        r = rig_sweep(f, out, "--ray", "auto", env={"RAY_ADDRESS": cluster})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("# rig sweep (2 cells)")
    _, cells = load_sweep(f)
    host = socket.gethostname()
    for c in cells:
        st = JobState.model_validate_json((job_dir(out, c, 0, 1) / "job.json").read_text())
        assert st.status == "done" and st.attempts == 1 and st.node == host
        run = run_folder(job_dir(out, c, 0, 1))
        assert run is not None and RunManifest.read(run).status == "finished" and len(stored(run)) == 2
        # the live table's last frame: the cell done, on which node, its episodes
        assert any(
            c.key in line and "done" in line and host in line and "2/2" in line for line in r.stderr.splitlines()
        )
    assert (out / "leaderboard.html").exists()


def test_cells_get_the_gpus_they_ask_ray_for(cluster: str, sweep_dir: Path) -> None:
    f = write(
        sweep_dir,
        "models: [fake-a, fake-b]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 3\n"
        "models_file: models.yaml\nresources: {num_gpus: 1, num_cpus: 1}\n",
    )
    out = sweep_dir / "out"
    r = rig_sweep(f, out, "--ray", cluster)
    assert r.returncode == 0, r.stderr[-3000:]
    _, cells = load_sweep(f)
    devices, spans = [], []
    for c in cells:
        jd = job_dir(out, c, 0, 1)
        devices += [line.split("=", 1)[1] for line in (jd / "bench.log").read_text().splitlines() if "VISIBLE" in line]
        run = run_folder(jd)
        assert run is not None
        man = RunManifest.read(run)
        assert man.finished_at is not None and man.config.gpu == 0  # the first (only) GPU it was given
        spans.append((man.started_at, man.finished_at))
    assert sorted(devices) == ["0", "1"]  # one GPU each, not the same one
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1  # two GPUs, two cells at once


def test_ray_worker_killed_mid_cell_is_retried_and_resumed(cluster: str, sweep_dir: Path) -> None:
    f = write(
        sweep_dir,
        "models: [fake-a]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 6\n"
        "models_file: models.yaml\n",
    )
    out = sweep_dir / "out"
    jd = job_dir(out, load_sweep(f)[1][0], 0, 1)
    killed: list[str] = []

    def killer() -> None:  # SIGKILL the Ray worker running the cell once the cell has stored two episodes
        deadline = time.time() + 120
        while time.time() < deadline:
            run = run_folder(jd) if jd.exists() else None
            if run is not None and (run / "results.sqlite").exists() and len(stored(run)) >= 2:
                pid = JobState.model_validate_json((jd / "job.json").read_text()).pid
                worker = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                name = Path(f"/proc/{worker}/cmdline").read_text()
                os.kill(worker, signal.SIGKILL)
                killed.append(name)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    r = rig_sweep(f, out, "--ray", cluster)
    t.join()
    assert r.returncode == 0, r.stderr[-3000:]
    assert killed and killed[0].startswith("ray::"), killed  # the cell's parent was the Ray worker
    st = JobState.model_validate_json((jd / "job.json").read_text())
    assert st.status == "done" and st.attempts == 2 and st.resumed == 1
    assert "worker lost" in st.errors[0] and "WorkerCrashedError" in st.errors[0]
    run = run_folder(jd)
    assert run is not None and RunManifest.read(run).status == "finished"
    keys = stored(run)
    assert len(keys) == len(set(keys)) == 6  # every episode once: none lost, none run twice


def test_ship_brings_run_folders_back_to_the_driver(cluster: str, sweep_dir: Path) -> None:
    f = write(
        sweep_dir,
        "models: [fake-a]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 2\n"
        "models_file: models.yaml\n",
    )
    out = sweep_dir / "out"
    r = rig_sweep(f, out, "--ray", cluster, "--ship")
    assert r.returncode == 0, r.stderr[-3000:]
    jd = job_dir(out, load_sweep(f)[1][0], 0, 1)
    run = run_folder(jd)  # written on the worker under a temporary folder, unpacked here
    assert run is not None and RunManifest.read(run).status == "finished" and len(stored(run)) == 2
    assert "fake engine:" in (jd / "bench.log").read_text()
    again = rig_sweep(f, out, "--ray", cluster, "--ship")
    assert again.returncode == 0 and "1 of 1 jobs already finished; skipped" in again.stderr
    assert run_folder(jd) == run
