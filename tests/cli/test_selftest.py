"""`rig selftest` as a user runs it: every benchmark, every mode, on the embedded data (what CI runs), its exit codes,
and a plugin benchmark without a gold agent listed as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig import plugins
from rig.benchmarks import BENCHMARKS
from rig.cli import app

PLUGINS = Path(__file__).parent / "plugins"


def test_every_benchmark_reaches_its_bounds_in_every_mode(helsinki_pack: Path, tmp_path: Path) -> None:
    out = tmp_path / "selftest.json"
    r = CliRunner().invoke(app, ["selftest", "--out", str(out)])
    assert r.exit_code == 0, r.output[-3000:]
    report = json.loads(out.read_text())
    ran = {b["name"]: b for b in report["benchmarks"]}
    assert set(BENCHMARKS) <= set(ran) and all(ran[n]["status"] == "ran" for n in BENCHMARKS)
    for name in BENCHMARKS:
        modes = ran[name]["modes"]
        assert modes and all(m["error"] is None and m["played"] == m["episodes"] > 0 for m in modes), name
        verdicts = {line["verdict"] for m in modes for line in m["metrics"]}
        assert verdicts <= {"ok", "cap"}, (name, verdicts)
    assert "llama.cpp" in report["acceptors"]  # every constrained gold reply checked by llama.cpp's own grammar
    for name in BENCHMARKS:
        assert f"## {name}" in r.output


def test_a_plugin_benchmark_without_gold_is_listed_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    plugins.discover.cache_clear()
    try:
        r = CliRunner().invoke(app, ["selftest", "-b", "nogold", "-b", "callnavi", "--mode", "decode=none mode=paper"])
    finally:
        plugins.discover.cache_clear()
    assert r.exit_code == 0, r.output
    assert "## nogold\n\nno gold" in r.output and "## callnavi" in r.output


def test_a_plugin_episode_that_crashes_is_named_and_fails_the_selftest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    plugins.discover.cache_clear()
    try:
        r = CliRunner().invoke(app, ["selftest", "-b", "crashgold"])
    finally:
        plugins.discover.cache_clear()
    assert r.exit_code == 1, r.output
    assert "run_episode crashed" in r.output and "e1: gold: RuntimeError: this plugin's scorer broke" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stop_exits_130_without_a_traceback(tmp_path: Path, how: str) -> None:
    """Ctrl-C (SIGINT to the process group) or SIGTERM after the first mode was judged: exit 130, the hint, no
    traceback."""
    from tests.test_interrupt import stopped_midway

    args = ["selftest", "-b", "callnavi", "--mode", "decode=none"]
    r = stopped_midway(tmp_path, tmp_path / "ready", "rig.execution.selftest:_judge", args, how)
    assert r.returncode == 130, r.stderr[-2000:]
    assert "interrupted" in r.stderr and "Traceback" not in r.stderr


def _callnavi(tmp_path: Path, ground_truth: dict | None, qid: str = "q1") -> Path:
    (tmp_path / "Questions").mkdir()
    (tmp_path / "APIs").mkdir()
    q = {"id": qid, "question": [{"role": "user", "content": "q"}], "difficulty": "easy"}
    if ground_truth is not None:
        q["ground_truth"] = ground_truth
    (tmp_path / "Questions" / "bank.json").write_text(json.dumps([q]))
    (tmp_path / "APIs" / "bank.json").write_text(json.dumps({"api_ports": [{"name": "getX", "parameters": {}}]}))
    return tmp_path


def test_exit_2_only_when_nothing_could_run(tmp_path: Path) -> None:
    data = _callnavi(tmp_path, None)  # the one question has no ground truth
    r = CliRunner().invoke(app, ["selftest", "-b", "callnavi", "--data", str(data), "--mode", "decode=none mode=paper"])
    assert r.exit_code == 2, r.output
    assert "gold unavailable" in r.output and "'q1'.ground_truth" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["selftest", "-b", "callnavi", "--data", str(tmp_path / "none")])
    assert r.exit_code == 2 and "nothing could run" in r.output


def test_text_from_the_data_reaches_the_terminal_printable(tmp_path: Path) -> None:
    data = _callnavi(tmp_path, None, qid="q\x1b[2J\u202e")  # a broken gold under an id with escapes
    r = CliRunner().invoke(app, ["selftest", "-b", "callnavi", "--data", str(data), "--mode", "decode=none mode=paper"])
    assert r.exit_code == 2 and "gold unavailable" in r.output
    assert "\x1b" not in r.output and "\u202e" not in r.output, r.output


def test_exit_1_when_a_metric_falls_short(tmp_path: Path) -> None:
    data = _callnavi(tmp_path, {"API": ["getX"], "parameters": [{"k": "v" * 40}]})  # past the grammar's value bound
    r = CliRunner().invoke(app, ["selftest", "-b", "callnavi", "--data", str(data), "--mode", "decode=json mode=paper"])
    assert r.exit_code == 1, r.output
    assert "gold falls short" in r.output and "(constraint)" in r.output


def test_bad_flags_exit_2() -> None:
    r = CliRunner().invoke(app, ["selftest", "-b", "nosuch"])
    assert r.exit_code == 2 and "unknown" in r.output
    r = CliRunner().invoke(app, ["selftest", "--data", "x"])
    assert r.exit_code == 2 and "exactly one --benchmark" in r.output
