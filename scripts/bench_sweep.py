"""Scheduling overhead of `rig sweep` per cell against a short cell's wall time.

A short cell (gemma3-270m, CallNavi routing, one question, 8 tokens) runs as a plain `rig bench` process and as a
one-cell sweep, locally and, with --ray, as a Ray task on a local cluster (cluster start reported apart: it is paid
once per sweep, not per cell), in K interleaved rounds. A cell's scheduling overhead is the driver's submit-to-result
time minus its `rig bench` process's own wall time (`JobState.wall_s - process_s`), measured in the same attempt so
that a loaded host's noise cancels; the ratio is the median overhead over the plain cell's median wall time.
Writes benchmarks/results/sweep_overhead.md.

    PYTHONPATH=. python scripts/bench_sweep.py --k 5 --ray
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rig.sweep.run import run_sweep
from rig.sweep.spec import load_sweep

REPO = Path(__file__).resolve().parents[1]
CELL = "models: [gemma3-270m]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\nlimit: 1\nmax_tokens: 8\n"


def plain(tmp: Path, i: int) -> float:
    argv = [
        sys.executable,
        "-m",
        "rig.cli",
        "bench",
        "-m",
        "gemma3-270m",
        "-b",
        "callnavi",
        "-O",
        "task=routing",
        "--limit",
        "1",
        "--max-tokens",
        "8",
        "--seed",
        "0",
        "--out",
        str(tmp / f"plain-{i}"),
        "--no-report",
    ]
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - t


def swept(tmp: Path, i: int, ray: str | None) -> tuple[float, float]:
    f = tmp / "cell.yaml"
    f.write_text(CELL)
    spec, cells = load_sweep(f)
    res = run_sweep(spec, cells, tmp / f"sweep-{'ray' if ray else 'threads'}-{i}", ray=ray, say=lambda m: None)
    job = res.jobs[0]
    assert job.status == "done" and job.attempts == 1 and job.wall_s is not None and job.process_s is not None, job
    return job.wall_s, job.wall_s - job.process_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--ray", action="store_true", help="also measure Ray tasks on a local cluster")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "sweep_overhead.md")
    a = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    rows = []
    per_round: dict[str, list[tuple[float, float]]]  # scheduler -> (cell wall, overhead) per round
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        plain(tmp, -1)  # warm the page cache for the weights
        modes: list[tuple[str, str | None]] = [("local process", None)]
        ray_start = None
        if a.ray:
            import ray

            t = time.perf_counter()
            ray.init(
                address="local",
                _node_ip_address="127.0.0.1",
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            ray_start = time.perf_counter() - t
            modes.append(("Ray task (local cluster)", "local"))
        # interleaved rounds (plain, then each scheduler), so a shared host's load drifts across all of them alike
        p: list[float] = []
        per_round = {name: [] for name, _ in modes}
        for i in range(a.k):
            p.append(plain(tmp, i))
            for name, mode in modes:
                per_round[name].append(swept(tmp, i, mode))
        mp = statistics.median(p)
        for name, _ in modes:
            ms, mo = statistics.median(x for x, _ in per_round[name]), statistics.median(o for _, o in per_round[name])
            rows.append((name, ms, mo, mo / mp))
    lines = [
        "# rig sweep: scheduling overhead per cell",
        "",
        f"Host: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared with other work "
        "while measured). Cell: gemma3-270m, CallNavi routing, `--limit 1`, `--max-tokens 8`. "
        f"K = {a.k} interleaved rounds (plain, local, Ray); medians.",
        "",
        f"Plain `rig bench` process, median wall time: {mp:.3f} s (runs: {', '.join(f'{x:.2f}' for x in p)}).",
        "",
        "| Scheduler | Cell in sweep, median (s) | Overhead median (s) | Overhead / plain cell |",
        "|---|---|---|---|",
    ]
    lines += [f"| {n} | {ms:.3f} | {ov:.3f} | {r:.2%} |" for n, ms, ov, r in rows]
    lines += [""] + [
        f"{n}, per round: cell {', '.join(f'{w:.2f}' for w, _ in runs)} s; "
        f"overhead {', '.join(f'{o:.3f}' for _, o in runs)} s."
        for n, runs in per_round.items()
    ]
    if ray_start is not None:
        lines += ["", f"Ray local cluster start (once per sweep, not per cell): {ray_start:.1f} s."]
    lines += [
        "",
        "Target: overhead under 5% of a short cell. Unverified: N one-GPU cells taking close to 1/N of the "
        "sequential time on a machine with several GPUs (no such machine was available; a one-GPU machine cannot "
        "show it).",
        "",
    ]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
