"""The README's "Where results go" screenshots, from the recorded five-benchmark run of the embedded model
(tests/fixtures/run_before_issue17, copied to a temporary folder, never written to):

- docs/img/results-inspect-view.png: `inspect view` on the run's Inspect logs (`rig export RUN --format inspect`),
  an EVGeoQA episode with its tool calls and the tools' answers;
- docs/img/results-mlflow-run.png: the run in MLflow's UI (a real `mlflow server` on 127.0.0.1, sqlite, the run sent
  with `rig export RUN --mlflow URI`): its metrics and params.

Headless Chromium is driven over its DevTools protocol (`tests/devtools.py`), since both pages fill themselves in
after loading; everything runs inside `unshare -n` (loopback only). Each PNG is reduced to a 256-colour palette.

    python scripts/results_screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RUN = REPO / "tests" / "fixtures" / "run_before_issue17"
INSIDE = "RIG_SCREENSHOTS_INSIDE"


def _wait(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _small_png(path: Path) -> None:
    """The screenshot as a 256-colour palette PNG: text and flat UI colours survive, the file is a third."""
    from PIL import Image

    with Image.open(path) as img:
        img.convert("RGB").quantize(256).save(path, optimize=True)


def inspect_shot(run: Path, out: Path) -> None:
    from rig.engines.server import free_port
    from rig.integrations.inspect_log import write_inspect_logs
    from rig.runfolder.folder import RunFolder
    from tests.devtools import open_page

    (log,) = [p for p in write_inspect_logs(run) if "_evgeoqa_" in p.name]
    r = next(r for r in RunFolder(run).results("evgeoqa") if r.tool_calls)
    port = free_port()
    inspect = shutil.which("inspect") or "inspect"
    view = subprocess.Popen(
        [inspect, "view", "--log-dir", str(run / "inspect"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(f"http://127.0.0.1:{port}/")
        url = f"http://127.0.0.1:{port}/#/logs/{log.name}/samples/sample/{quote(r.episode_id, safe='')}/1/messages"
        # down the message list to the question (the viewer shows roles in capitals: the text is lower case), so
        # the first calls with their arguments and the tools' answers are in view
        scroll = (
            "(async () => { const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT); let n; "
            "while ((n = w.nextNode())) { if (n.textContent.trim().toLowerCase() === 'user') { "
            "n.parentElement.scrollIntoView({block: 'start'}); break; } } "
            "await new Promise(r => setTimeout(r, 800)); return 1 })()"
        )
        open_page(url, [r.tool_calls[0].name], probe=scroll, shot=out, size=(1300, 1000))
    finally:
        view.terminate()
        view.wait(timeout=20)
    _small_png(out)


def mlflow_shot(run: Path, root: Path, out: Path) -> None:
    from rig.integrations.mlflow import export_run
    from tests.devtools import open_page
    from tests.integrations.mlflow_server import start_server, stop_server

    proc, uri = start_server(root)
    try:
        result = export_run(run, uri)
        url = f"{uri}/#/experiments/{result.experiment_id}/runs/{result.mlflow_run_id}"
        # the assistant side panel closed, so the metrics and params tables get the page's width
        close = (
            "(async () => { const b = document.querySelector('button[aria-label=Close]'); if (b) b.click(); "
            "await new Promise(r => setTimeout(r, 1000)); return 1 })()"
        )
        open_page(url, ["spec.model", "callnavi/headline"], probe=close, shot=out, size=(1400, 1300))
    finally:
        stop_server(proc)
    _small_png(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    args = ap.parse_args()
    out = args.out.resolve()
    if os.environ.get(INSIDE) != "1":  # run again inside a network namespace with only loopback
        inner = f"ip link set lo up && exec {sys.executable} {Path(__file__).resolve()} --out {out}"
        env = {**os.environ, INSIDE: "1", "PYTHONPATH": str(REPO)}
        return subprocess.run(["unshare", "-n", "bash", "-c", inner], env=env).returncode
    with tempfile.TemporaryDirectory(prefix="rig-shots-") as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(RUN, run)
        inspect_shot(run, out / "results-inspect-view.png")
        (Path(tmp) / "mlflow").mkdir()
        mlflow_shot(run, Path(tmp) / "mlflow", out / "results-mlflow-run.png")
    for name in ("results-inspect-view.png", "results-mlflow-run.png"):
        print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
