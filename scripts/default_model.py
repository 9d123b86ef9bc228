"""Which embedded model shows the most signal: each candidate on all five benchmarks, unconstrained and constrained.

For every model and decode mode, one `rig bench --limit N` process over every benchmark (the same seed, so the same
episodes), then per benchmark from the run folder's `RunSummary`: the headline with its 95% CI, replies cut at
max_tokens, latency p50, decode tokens/s, peak RSS, and the failure reasons (error categories) of the episodes that
scored 0. Then the README's first command on the chosen default (`rig bench --model M --limit 2`, as written: report
and one screen included), timed as whole processes, median of `--first-runs`. Timings are only comparable within one
run of this script on a quiet host: the load average before and after each run is printed beside it.

    python scripts/default_model.py --models gemma3-270m,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b --limit 10
    python scripts/default_model.py --first qwen2.5-coder-1.5b --first-runs 2 --skip-table
    python scripts/default_model.py --models gemma3-270m --decodes none   # one model, one mode, into the same --work
    python scripts/default_model.py --models gemma3-270m --benchmarks callnavi,routeeval   # a process per benchmark
    python scripts/default_model.py --render                               # the table of every run under --work
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rig.runfolder.folder import RunFolder
from rig.runfolder.summary import RunSummary

DECODES = ("none", "json")


def timed(argv: list[str], runs: Path, cwd: Path | None = None) -> tuple[Path, float, str]:
    """One `rig` process: the newest run folder under ``runs``, wall seconds and the load averages around it."""
    before = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rig.cli", *argv], check=True, cwd=cwd)
    wall = time.perf_counter() - t0
    return max(runs.iterdir(), key=lambda p: p.stat().st_mtime), wall, f"{before:.1f} -> {os.getloadavg()[0]:.1f}"


def bench(model: str, out: Path, limit: int, decode: str, benchmark: str | None = None) -> tuple[Path, float, str]:
    """One `rig bench` process (every benchmark, or the one named), without its report."""
    argv = ["bench", "--model", model, "--limit", str(limit), "--decode", decode]
    argv += ["--benchmark", benchmark] if benchmark else []
    return timed([*argv, "--seed", "0", "--out", str(out), "--no-report"], out)


def first_command(model: str, cwd: Path) -> tuple[Path, float, str]:
    """The README's first `rig bench` exactly as written (report, html and the one screen included), in a folder of
    its own so its `runs/` holds only this run."""
    cwd.mkdir(parents=True, exist_ok=True)
    return timed(["bench", "--model", model, "--limit", "2"], cwd / "runs", cwd=cwd)


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "n/m" if x is None else format(x, spec)


def headline(s: RunSummary) -> str:
    h = s.headline
    if h is not None and h.samples == 1:  # one scored episode: its score, with no CI to give
        return f"{h.scores[0].score:.2f} (n=1, no CI)"
    if h is None or h.mean is None:
        return "n/m"
    return f"{h.mean:.2f} [{h.low:.2f}, {h.high:.2f}]"


def failures(folder: RunFolder, bench_name: str, s: RunSummary) -> str:
    """Error categories of the episodes whose headline score was 0 (the three most common)."""
    zero = {(e.episode_id, e.repeat) for e in (s.headline.scores if s.headline else []) if e.score == 0}
    reasons = collections.Counter(
        r.error_category or r.tags.get("stop") or "wrong answer"
        for r in folder.results(bench_name)
        if (r.episode_id, r.repeat) in zero
    )
    return ", ".join(f"{k} {v}" for k, v in reasons.most_common(3)) or "-"


def rows_for(model: str, decode: str, run: Path) -> list[str]:
    folder = RunFolder(run)
    out = []
    for info in folder.benchmarks:
        s = folder.summary(info.name)
        if s.episodes == 0:  # a stopped run's benchmarks that had not started
            continue
        cut = "n/m" if s.cut_replies is None else f"{s.cut_replies}/{s.finish_reasons}"
        rss = fmt(s.peak_rss_bytes / 2**30 if s.peak_rss_bytes else None)
        out.append(
            f"| {model} | {decode} | {info.name} | {s.episodes} | {headline(s)} | {cut} | {fmt(s.e2e_p50_s, '.1f')} "
            f"| {fmt(s.decode_tps_median, '.1f')} | {rss} | {failures(folder, info.name, s)} |"
        )
    return out


def rendered(work: Path) -> list[str]:
    """Rows of every finished run under ``work`` (one folder per model and decode mode), in model then mode order."""
    from rig.runfolder.manifest import RunManifest

    runs = []
    for run in sorted(work.glob("*/*/manifest.json")):
        m = RunManifest.read(run.parent)
        if m.status not in ("finished", "interrupted"):
            print(f"{run.parent}: {m.status}, left out", file=sys.stderr)
            continue
        # a stopped run's stored episodes are shown, its model cell marked: its episodes column says how many
        label = m.config.model.name + (" (stopped)" if m.status == "interrupted" else "")
        runs.append((m.config.model.name, DECODES.index(m.config.decode), run.parent, label))
    return [row for _, d, run, label in sorted(runs) for row in rows_for(label, DECODES[d], run)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gemma3-270m,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--work", type=Path, default=Path("runs/default-model"))
    ap.add_argument("--first", help="time the README's first command (`rig bench --limit 2`) on this model")
    ap.add_argument("--first-runs", type=int, default=2)
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--benchmarks", default=None, help="comma-separated; each runs as its own process")
    ap.add_argument("--decodes", default=",".join(DECODES), help="decode modes to run, comma-separated")
    ap.add_argument("--render", action="store_true", help="only print the table of the finished runs under --work")
    args = ap.parse_args()
    lines = [
        "| model | decode | benchmark | episodes | headline [95% CI] | cut | latency p50 (s) | decode tok/s "
        "| RSS (GiB) | why episodes scored 0 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    walls = []
    if args.render:
        print("\n".join([*lines, *rendered(args.work)]))
        return
    if not args.skip_table:
        for model in args.models.split(","):
            for decode in args.decodes.split(","):
                # one process per benchmark when --benchmarks names them (a slow one can be left to the end)
                for name in args.benchmarks.split(",") if args.benchmarks else [None]:
                    run, wall, load = bench(model, args.work / f"{model}-{decode}", args.limit, decode, name)
                    what = f"{model}, decode {decode}" + (f", {name}" if name else "")
                    walls.append(f"- {what}: {wall / 60:.1f} min (load average {load}), run {run.name}")
                    lines += rows_for(model, decode, run)
                    print("\n".join(lines), flush=True)
    if args.first:
        times = []
        for i in range(args.first_runs):
            run, wall, load = first_command(args.first, args.work / f"first-{i}")
            times.append(wall)
            walls.append(f"- first command, {args.first}, run {i + 1}: {wall / 60:.1f} min (load average {load})")
        walls.append(f"- first command median: {statistics.median(times) / 60:.1f} min over {len(times)} runs")
    print("\n".join([*lines, "", *walls]))


if __name__ == "__main__":
    main()
