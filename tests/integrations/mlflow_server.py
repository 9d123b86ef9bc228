"""A real `mlflow server` (sqlite store, proxied artifacts, one worker) on a free loopback port, for the MLflow
tests and `scripts/results_screenshots.py`."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rig.engines.server import free_port

SERVER_START_S = 180  # a loaded two-core host takes ~40 s to bring the server up


def start_server(root: Path, host: str = "127.0.0.1", netns_cmd: list[str] | None = None) -> tuple[Any, str]:
    """`mlflow server` with a sqlite store and proxied artifacts under ``root``, on a free port; (process, URI)."""
    port = free_port()
    cmd = [
        *(netns_cmd or []),
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        f"sqlite:///{root}/mlflow.db",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = (root / "server.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://{host}:{port}"
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
        with contextlib.suppress(OSError):
            c = http.client.HTTPConnection(host, port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc, uri
        time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError("mlflow server did not answer /health in time")


def stop_server(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
