"""rig sweep end to end on a real local Ray cluster: gemma3-270m and its q4_0 variant x two benchmarks (CallNavi routing
and RouteEval), on CPU inside the test's own loopback-only cluster; the leaderboard's numbers equal those of the same
cells run one by one, and so do their replies episode by episode."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rig.analyses.compare import run_summary
from rig.render.report import fmt
from rig.runfolder.store import Store
from rig.sweep.run import job_dir, run_folder
from rig.sweep.spec import load_sweep
from tests.conftest import REPO

pytestmark = pytest.mark.model


def per_episode(run: Path) -> dict:
    s = Store(run / "results.sqlite")
    try:
        return {(r.episode_id, r.repeat): (r.scores, [g.text for g in r.generations]) for r in s.results()}
    finally:
        s.close()


def test_ray_sweep_2x2_matches_cells_run_one_by_one(tmp_path: Path, quantized_models: Path) -> None:
    pytest.importorskip("ray")
    models = quantized_models
    f = tmp_path / "sweep.yaml"
    f.write_text(
        "models: [gemma3-270m, gemma3-270m-q4_0]\n"
        "benchmarks:\n  - {name: callnavi, options: {task: routing}}\n"
        "  - routeeval\n"
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
            c.benchmark,
            "--models",
            str(models),
            "--limit",
            "2",
            "--max-tokens",
            "8",
            "--seed",
            "0",
            *[x for k, v in c.options.items() for x in ("-O", f"{k}={v}")],
            "--out",
            str(out),
            "--no-report",
        ]
        b = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO)
        assert b.returncode == 0, b.stderr[-2000:]
        one = next(out.iterdir())
        s = run_summary(one)
        h = s.headline
        assert h is not None and h.samples == 2
        row = next(line for line in md.splitlines() if line.endswith(f"| {c.key} |"))
        cols = [x.strip() for x in row.strip("|").split("|")]
        bench = " ".join([c.benchmark, *(f"{k}={v}" for k, v in c.options.items())])
        assert cols[:6] == [c.model, s.quantization, bench, "none", "prompt", "2"]
        assert cols[6:9] == [fmt(v) for v in (h.mean, h.low, h.high)], row
        assert cols[11] == fmt(s.completion_tokens_mean), row  # greedy: the same tokens, so the same count
        # and the same replies episode by episode: the cell ran this model on these questions with these options
        cell_run = run_folder(job_dir(tmp_path / "sweep", c, 0, 1))
        assert cell_run is not None and per_episode(cell_run) == per_episode(one)
        assert re.fullmatch(r"\d+\.\d{3}", cols[9]) and re.fullmatch(r"\d+\.\d{3}", cols[12])  # latency, memory
    paired = md.split("Paired differences against gemma3-270m")[1]  # the q4_0 cells against the baseline's
    assert "| gemma3-270m-q4_0 | callnavi task=routing | none | prompt | 2 |" in paired
    assert "| gemma3-270m-q4_0 | routeeval | none | prompt | 2 |" in paired
