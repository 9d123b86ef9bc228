"""rig sweep end to end on a real local Ray cluster: gemma3-270m and its q4_0 variant x two CallNavi tasks, on CPU
inside the test's own loopback-only cluster; the leaderboard's scores equal those of the same cells run one by one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rig.runs.compare import run_summary
from rig.runs.report import fmt
from rig.sweep.spec import load_sweep
from tests.conftest import REPO

pytestmark = pytest.mark.model


def test_ray_sweep_2x2_matches_cells_run_one_by_one(tmp_path: Path, quantized_models: Path) -> None:
    pytest.importorskip("ray")
    models = quantized_models
    f = tmp_path / "sweep.yaml"
    f.write_text(
        "models: [gemma3-270m, gemma3-270m-q4_0]\n"
        "benchmarks:\n  - {name: callnavi, options: {task: routing}}\n"
        "  - {name: callnavi, options: {task: params}}\n"
        "limit: 2\nmax_tokens: 8\nmodels_file: models.yaml\nresources: {num_cpus: 1}\n"
    )
    env = os.environ | {"RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "sweep", str(f), "--ray", "local", "--out", str(tmp_path / "sweep")],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    md = (tmp_path / "sweep" / "leaderboard.md").read_text()
    assert r.stdout.strip().startswith("# rig sweep (4 cells)")
    _, cells = load_sweep(f)
    for c in cells:  # the same cell by hand, with rig bench
        out = tmp_path / "one" / c.key
        argv = [
            sys.executable,
            "-m",
            "rig.cli",
            "bench",
            "-m",
            c.model,
            "-b",
            "callnavi",
            "--models",
            str(models),
            "--limit",
            "2",
            "--max-tokens",
            "8",
            "--seed",
            "0",
            "-O",
            f"task={c.options['task']}",
            "--out",
            str(out),
            "--no-report",
        ]
        b = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO)
        assert b.returncode == 0, b.stderr[-2000:]
        s = run_summary(next(out.iterdir()))
        h = s.headline
        assert h is not None and h.samples == 2
        row = next(line for line in md.splitlines() if line.endswith(f"| {c.key} |"))
        cols = [x.strip() for x in row.strip("|").split("|")]
        assert cols[:6] == [c.model, s.quantization, f"callnavi task={c.options['task']}", "none", "prompt", "2"]
        assert cols[6:9] == [fmt(v) for v in (h.mean, h.low, h.high)], row
        assert re.fullmatch(r"\d+\.\d{3}", cols[9]) and re.fullmatch(r"\d+\.\d{3}", cols[12])  # latency, memory
    assert md.count("| gemma3-270m-q4_0 | callnavi task=") == 2  # paired against the baseline, one row per task
