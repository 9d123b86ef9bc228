"""UrbanGeoEval end to end on CPU with the embedded Gemma 3 270M as candidate and as judge, in process and through
`rig bench`. A 270M model answers poorly; what is checked is that every episode ends scored with its judge recorded,
that a constrained verdict always parses, and that an unparsed one is recorded as such."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rig.benchmarks.base import RunContext
from rig.benchmarks.urbangeo.benchmark import UrbanGeoEval
from rig.benchmarks.urbangeo.judge import REASON_MAX
from rig.records import Sampling

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[3]
UNPARSED = {"missing", "malformed", "ambiguous", "out_of_range", "inconsistent_total"}
CTX = RunContext(sampling=Sampling(temperature=0.0, max_tokens=256, seed=0), decode="json")


def _run(bench: UrbanGeoEval, engine, eps) -> list:  # type: ignore[no-untyped-def]
    async def go() -> list:
        return [await bench.run_episode(e, engine, CTX, 0) for e in eps]

    return asyncio.run(go())


def test_embedded_model_as_candidate_and_constrained_judge(gemma_engine, helsinki_pack: Path) -> None:  # type: ignore[no-untyped-def]
    b = UrbanGeoEval(
        options={
            "n_per_template": "1",
            "n_per_task": "1",
            "templates": "Classify_POI,Landuse_AOI",
            "tasks": "DS,RE",
            "max_tokens": "64",
            "judge_max_tokens": "48",
            "judge_decode": "verdict",
        }
    )
    eps = b.episodes()
    assert [e.tags["module"] for e in eps] == ["knowledge"] * 2 + ["reasoning"] * 2
    for e, r in zip(eps, _run(b, gemma_engine, eps), strict=True):
        g = r.generations[0]
        assert g.error is None and r.status == "scored", (r.error, g.text)
        if e.tags["module"] == "knowledge":  # --decode json: the reply is constrained to one option letter
            assert g.text.strip() in e.ground_truth["letters"] and r.scores["parsed"] == 1.0
            assert r.scores["correct"] == float(g.text.strip() == e.ground_truth["answer"])
            continue
        judge = r.output["judge"]
        assert r.tags["judge"] == judge["model"] == "gemma3-270m" and judge["temperature"] == 0.6
        assert r.tags["judge_temperature"] == "0.6" and judge["decode"] == "verdict"
        if judge["finish_reason"] == "stop":  # a complete constrained verdict always parses
            assert judge["status"] == "ok", judge
            assert 0 <= r.scores["reason"] <= REASON_MAX[e.tags["task"]] and 0 <= r.scores["answer_judge"] <= 10
            assert r.scores["total"] == pytest.approx(r.scores["reason"] + r.scores["answer"])
        assert 0.0 <= r.scores["answer"] <= 10.0 and r.scores["answer_program"] == r.scores["answer"]


def test_free_judge_verdict_is_parsed_or_recorded_unparsed(gemma_engine, helsinki_pack: Path) -> None:  # type: ignore[no-untyped-def]
    b = UrbanGeoEval(
        options={"modules": "reasoning", "tasks": "DS", "n_per_task": "1", "max_tokens": "48", "judge_max_tokens": "64"}
    )
    (r,) = _run(b, gemma_engine, b.episodes())
    judge = r.output["judge"]
    assert judge["status"] == "ok" or judge["status"] in UNPARSED, judge
    if judge["status"] != "ok":
        assert r.error_category == "judge_unparsed" and r.scores["reason"] is None and r.scores["total"] is None
        assert judge["text"] is not None  # the raw verdict is kept for inspection


def test_separate_judge_entry_is_loaded_once_and_closed(
    gemma_engine,
    helsinki_pack: Path,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    entry = yaml.safe_load((REPO / "models.yaml").read_text())["models"]["gemma3-270m"]
    models = tmp_path / "judges.yaml"
    models.write_text(yaml.safe_dump({"models": {"gemma-judge": entry}}))
    b = UrbanGeoEval(
        options={
            "modules": "reasoning",
            "tasks": "DR,PR",
            "n_per_task": "1",
            "max_tokens": "32",
            "judge": "gemma-judge",
            "judge_models": str(models),
            "judge_decode": "verdict",
            "judge_max_tokens": "48",
            "judge_temperature": "0",
        }
    )
    eps = b.episodes()
    res = _run(b, gemma_engine, eps[:1])
    first = b.judge._engine
    assert first is not None and first is not gemma_engine
    res += _run(b, gemma_engine, eps[1:])
    assert b.judge._engine is first  # one load for the whole benchmark instance
    for r in res:
        assert r.tags["judge"] == "gemma-judge" and r.output["judge"]["model"] == "gemma-judge"
        assert r.output["judge"]["temperature"] == 0.0 and r.output["judge"]["status"] in {"ok"} | UNPARSED
    asyncio.run(b.teardown())
    assert b.judge._engine is None and first.llm is None  # type: ignore[attr-defined]


def test_cli_run_with_report(tmp_path: Path, embedded_weights: str, helsinki_pack: Path) -> None:
    opts = [
        "n_per_template=1",
        "n_per_task=1",
        "templates=Classify_POI,Query_Length",
        "tasks=DS,PN",
        "max_tokens=48",
        "judge_max_tokens=40",
        "judge_decode=verdict",
    ]
    out = tmp_path / "runs"
    cmd = [
        sys.executable,
        "-m",
        "rig.cli",
        "bench",
        "--model",
        "gemma3-270m",
        "--benchmark",
        "urbangeo",
        "--limit",
        "4",
        "--decode",
        "json",
        "--out",
        str(out),
    ]
    for o in opts:
        cmd += ["-O", o]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (run_dir,) = list(out.iterdir())
    con = sqlite3.connect(run_dir / "results.sqlite")
    rows = [json.loads(rec) for (rec,) in con.execute("SELECT record FROM results ORDER BY episode_id")]
    con.close()
    assert len(rows) == 4 and {r["tags"]["module"] for r in rows} == {"knowledge", "reasoning"}
    assert all(r["status"] == "scored" for r in rows)
    for r in rows:
        if r["tags"]["module"] == "reasoning":
            assert r["tags"]["judge"] == "gemma3-270m" and r["output"]["judge"]["status"] in {"ok"} | UNPARSED
    # The data hash recorded by the subprocess equals the one computed here: generation is deterministic
    # across processes (no reliance on Python's per-process string hashing).
    manifest = json.loads((run_dir / "manifest.json").read_text())
    info = manifest["config"]["benchmarks"][0]
    assert info["name"] == "urbangeo" and info["episodes"] == 4
    assert info["data_hash"] == UrbanGeoEval(options=dict(o.split("=", 1) for o in opts)).data_hash()
    # The terminal ends with the one-screen summary pointing at report.md; the full tables live there.
    assert "full tables:" in p.stdout and "report.md" in p.stdout, p.stdout[-2000:]
    report = (run_dir / "report.md").read_text()
    for title in (
        "layout of the paper's Table 4",
        "layout of the paper's Table 5",
        "judge verdicts per task",
        "per city",
    ):
        assert title in report, report[-2000:]
