"""Report scale check: a synthetic 10,000-episode CallNavi run -> HTML; time to build, file size, browser load.

    python scripts/bench_report.py --data ../shared/data/callnavi [--runs 3]
Writes benchmarks/results/report_scale.md. Targets: renders in under 5 s, file under 20 MB.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.records import EpisodeResult, Generation, Timings
from rig.registry import load_registry
from rig.render.html import html_report
from rig.runfolder.config import BenchmarkInfo, RunConfig
from rig.runfolder.manifest import RunManifest
from rig.runfolder.store import Store
from rig.telemetry.gpu import GpuMemorySummary


def synth_run(root: Path, data: Path, n: int) -> Path:
    bench = CallNavi(data)
    eps = bench.episodes()
    repeats = -(-n // len(eps))
    rng = random.Random(0)
    run_dir = root / "big"
    run_dir.mkdir()
    store = Store(run_dir / "results.sqlite")
    k = 0
    for rep in range(repeats):
        for e in eps:
            if k >= n:
                break
            ok = rng.random() < 0.4
            text = (
                '{"API": ["' + "x" * rng.randint(5, 40) + '"], "parameters": [{"a": "b"}]}' + " " * rng.randint(0, 200)
            )
            store.write(
                EpisodeResult(
                    benchmark="callnavi",
                    episode_id=e.id,
                    repeat=rep,
                    tags=e.tags,
                    scores={"routing": float(ok)}
                    if e.tags["task"] == "routing"
                    else {"syntax": 1.0, "structure": float(ok), "ast": float(ok), "order": float(ok)},
                    generations=[
                        Generation(
                            request_hash="h",
                            text=text,
                            prompt_tokens=rng.randint(900, 6000),
                            completion_tokens=rng.randint(10, 200),
                            timings=Timings(
                                e2e_s=rng.uniform(0.5, 9), ttft_s=rng.uniform(0.05, 3), decode_tps=rng.uniform(20, 40)
                            ),
                        )
                    ],
                )
            )
            k += 1
    store.close()
    spec = load_registry().get("gemma3-270m")
    info = BenchmarkInfo.of(bench, len(eps))
    cfg = RunConfig(
        model=spec,
        benchmarks=[info],
        repeats=repeats,
        limit=None,
        decode="none",
        tool_mode="prompt",
        seed=0,
        temperature=0.0,
        max_tokens=256,
        gpu=None,
    )
    RunManifest.begin(
        "big", cfg, status="finished", gpu_memory=GpuMemorySummary(available=False, reason="synthetic")
    ).write(run_dir)
    return run_dir


def browser_load_s(html: Path) -> float | None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        return None  # Chromium phones home on its own; it is only run inside a namespace with no route out
    t = time.perf_counter()
    subprocess.run(
        ["unshare", "-n", exe, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", html.as_uri()],
        capture_output=True,
        timeout=120,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/report_scale.md"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = synth_run(Path(tmp), a.data, a.episodes)
        build, load = [], []
        for _ in range(a.runs):
            t = time.perf_counter()
            html = html_report([run_dir])
            build.append(time.perf_counter() - t)
            path = run_dir / "report.html"
            path.write_text(html)
            b = browser_load_s(path)
            if b is not None:
                load.append(b)
        size = path.stat().st_size
    lines = [
        "# HTML report at scale",
        "",
        f"Synthetic CallNavi run of {a.episodes} episodes (real prompts from the dataset), {a.runs} runs, medians.",
        "",
        "| measure | median | target |",
        "|---|---|---|",
        f"| build HTML (Python) | {statistics.median(build):.2f} s | |",
        f"| headless Chromium load + script render (--dump-dom, incl. browser start) | "
        f"{statistics.median(load):.2f} s | |"
        if load
        else "| headless Chromium load | not measured (no chromium) | |",
        f"| build + load | {statistics.median(build) + (statistics.median(load) if load else 0):.2f} s | < 5 s |",
        f"| file size | {size / 2**20:.1f} MiB | < 20 MB |",
    ]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
