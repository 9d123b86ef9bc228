"""`rig rescore` end to end: hand-made prediction files in the reference harnesses' own formats (CallNavi's per-domain
output lists over the embedded sample; MobilityBench's raw_results.json over a hand-made upstream CSV) become run
folders that `rig report`, `--html` and `rig export` read."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.benchmarks.callnavi import data as D
from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.cli import app
from rig.execution.rescore import RescoreError, RescoreOptions, rescore
from rig.runformat import read_results

runner = CliRunner()


def _callnavi_questions() -> list[D.Question]:
    return D.load_domain(CallNavi.default_data(), "maps").questions


def _write(path: Path, rows: object) -> Path:
    path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return path


def _callnavi_files(tmp: Path) -> tuple[list[Path], int, int, int]:
    """Routing: even questions answered with a ```json fence (paper accepts, reference rejects), odd ones as a
    plain list (both accept). Params: every third question wrong, the rest the ground truth in single quotes."""
    qs = _callnavi_questions()
    routing, params = [], []
    for i, q in enumerate(qs):
        names = json.dumps(q.apis)
        routing.append({"predit": f"```json\n{names}\n```" if i % 2 == 0 else names, "ground_truth": str(q.apis)})
        gt = {"API": q.apis, "parameters": q.parameters}
        answer = {"API": ["noSuchApi"], "parameters": [{}]} if i % 3 == 0 else gt
        params.append({"predict": str(answer), "ground_truth": str(gt)})
    files = [_write(tmp / "maps_1_APIonly_mymodel.json", routing), _write(tmp / "maps_0_para_mymodel.json", params)]
    n = len(qs)
    plain = sum(1 for i in range(n) if i % 2 == 1)
    correct = sum(1 for i, q in enumerate(qs) if i % 3 != 0 and "'" not in json.dumps(q.parameters))
    return files, n, plain, correct


@pytest.mark.parametrize("mode", ["paper", "reference"])
def test_callnavi_rescore_report_html_export(tmp_path: Path, mode: str) -> None:
    files, n, plain, correct = _callnavi_files(tmp_path)
    res = runner.invoke(app, ["rescore", "callnavi", *map(str, files), "--mode", mode, "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    (run,) = (tmp_path / "runs").iterdir()
    results = read_results(run / "results.sqlite")
    assert len(results) == 2 * n and all(r.tags["mode"] == mode for r in results)
    # upstream's routing file is iteration 1 and its params file iteration 0: one pass, one repeat
    assert {r.repeat for r in results} == {0}
    routing = [r.scores["routing"] for r in results if r.tags["task"] == "routing"]
    assert sum(routing) == (n if mode == "paper" else plain)
    assert sum(r.scores["ast"] for r in results if r.tags["task"] == "params") == correct
    # both modes stored whichever is main: the fenced routing lists are where they differ
    rows = [r for r in results if r.tags["task"] == "routing"]
    assert (sum(r.scores["paper:routing"] for r in rows), sum(r.scores["reference:routing"] for r in rows)) == (
        n,
        plain,
    )
    params = [r for r in results if r.tags["task"] == "params"]
    assert sum(r.scores["paper:ast"] for r in params) == sum(r.scores["reference:ast"] for r in params) == correct
    rep = runner.invoke(app, ["report", str(run), "--html"])
    assert rep.exit_code == 0, rep.output
    assert f"{mode} mode (main)" in rep.output and "mymodel" in rep.output
    assert "re-scored by `rig rescore`" in rep.output
    assert f"{2 * n} of {2 * n} episodes" in rep.output and "Incomplete run" not in rep.output
    assert "repeats 1." in rep.output and "stability over repeats" not in rep.output
    other = "reference" if mode == "paper" else "paper"
    assert f"CallNavi (layout of the paper's Table 4), {other} mode\n" in rep.output
    assert f"| {plain / n:.3f} |" in rep.output and f"| {n / n:.3f} |" in rep.output  # Routing All, each mode
    # the differ table: routing in n episodes, paper n/n, reference plain/n, n - plain differ, all higher in paper
    assert f"| mymodel | Routing | {n} | 1.000 | {plain / n:.3f} | {n - plain} | {n - plain} | 0 |" in rep.output
    assert f"| mymodel | AST | {n} | {correct / n:.3f} | {correct / n:.3f} | 0 | 0 | 0 |" in rep.output
    assert "not recorded" in (run / "report.html").read_text(encoding="utf-8")
    exp = runner.invoke(app, ["export", str(run), "--format", "jsonl", "--out", str(tmp_path / "e.jsonl")])
    assert exp.exit_code == 0, exp.output
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 2 * n


def test_callnavi_iterations_count_per_task(tmp_path: Path) -> None:
    files, n, *_ = _callnavi_files(tmp_path)
    second = _write(tmp_path / "maps_3_para_mymodel.json", json.loads(files[1].read_text()))
    run = rescore(RescoreOptions(scorer="callnavi", predictions=[*files, second], out=tmp_path / "runs"))
    results = read_results(run / "results.sqlite")
    repeats = {t: sorted({r.repeat for r in results if r.tags["task"] == t}) for t in ("routing", "params")}
    assert repeats == {"routing": [0], "params": [0, 1]} and len(results) == 3 * n


def test_callnavi_misaligned_file_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    files, *_ = _callnavi_files(tmp_path)
    rows = json.loads(files[1].read_text())
    rows[0]["ground_truth"], rows[1]["ground_truth"] = rows[1]["ground_truth"], rows[0]["ground_truth"]
    _write(files[1], rows)
    res = runner.invoke(app, ["rescore", "callnavi", str(files[1]), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 2
    assert "maps_0_para_mymodel.json: record 0, field ground_truth" in " ".join(res.output.split())
    assert not (tmp_path / "runs").exists()  # nothing written for bad input
    short = _write(tmp_path / "maps_2_para_m.json", rows[:3])
    with pytest.raises(RescoreError, match="expected a list of 16 records"):
        rescore(RescoreOptions(scorer="callnavi", predictions=[short], out=tmp_path / "runs"))
    with pytest.raises(RescoreError, match="not a CallNavi output file name"):
        rescore(RescoreOptions(scorer="callnavi", predictions=[_write(tmp_path / "x.json", [])], out=tmp_path))


LOC = "116.30,39.98"
COLS = [
    "query",
    "context",
    "task_scenario",
    "intent_family",
    "city",
    "time",
    "weather_description",
    "tool_list",
    "ans_loc",
    "poi_result",
]


def _mobility_csv(tmp: Path) -> Path:
    rows = [
        {
            "query": "北京明天天气如何",
            "context": f"{{'user_current_location': '{LOC}', 'city': '北京市'}}",
            "task_scenario": "Weather Query",
            "intent_family": "Basic Information Retrieval",
            "city": "北京市",
            "time": "明天",
            "weather_description": "北京市明天晴，气温12℃",
            "tool_list": "[{'name': 'weather_query', 'arguments': {'city': '北京市', 'need_forecast': True}}]",
        },
        {
            "query": "颐和园在哪里",
            "context": f"{{'user_current_location': '{LOC}', 'city': '北京市'}}",
            "task_scenario": "POI Query",
            "intent_family": "Basic Information Retrieval",
            "tool_list": "[{'name': 'query_poi', 'arguments': {'keywords': '颐和园'}}]",
            "ans_loc": "116.27,39.99",
            "poi_result": "{'status': 1, 'data': {'location': '116.27,39.99', 'name': '颐和园'}}",
        },
    ]
    path = tmp / "cases.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        w.writerows(rows)
    return path


def _raw_results(tmp: Path) -> Path:
    usage = {
        "planner": {"prompt_tokens": 100, "completion_tokens": 20},
        "worker": {"total_tokens": 50},
        "reporter": {"prompt_tokens": 30, "completion_tokens": 10},
    }
    weather = {
        "case_id": "case_1",
        "model_name": "upstream-model",
        "planner_output": {"thinking": "查北京明天天气", "intent": "天气查询", "steps": [["查询北京明天天气"]]},
        "worker_output": [
            {
                "tool_calls": [{"id": "1", "name": "weather_query", "args": {"city": "北京市", "need_forecast": True}}],
                # the worker record's answers by call id: the ToolMessage text of the sandbox envelope (0 = SUCCESS)
                "tool_results": {"1": json.dumps({"status": 0, "data": {"weather_description": "晴"}, "error": None})},
            }
        ],
        "reporter_output": "北京市明天晴，气温12℃",
        "token_usage": usage,
        "error": None,
    }
    poi = {
        "case_id": "case_2",
        "model_name": "upstream-model",
        "planner_output": {},
        "worker_output": [],
        "reporter_output": "",
        "token_usage": {},
        "error": "planner crashed",
    }
    return _write(tmp / "raw_results.json", [weather, poi])


@pytest.mark.parametrize("mode", ["paper", "reference"])
def test_mobilitybench_rescore_report_html_export(tmp_path: Path, mode: str) -> None:
    data, raw = _mobility_csv(tmp_path), _raw_results(tmp_path)
    res = runner.invoke(
        app,
        [
            "rescore",
            "mobilitybench",
            str(raw),
            "--data",
            str(data),
            "--mode",
            mode,
            "-O",
            "similarity=jaccard",
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert res.exit_code == 0, res.output
    (run,) = (tmp_path / "runs").iterdir()
    by_id = {r.episode_id: r for r in read_results(run / "results.sqlite")}
    weather, poi = by_id["case_1"], by_id["case_2"]
    assert weather.tags["mode"] == mode and weather.scores["DR"] == 1.0
    assert weather.scores["reference:TS_R"] == 1.0
    # the reference's efficiency: planner and reporter as given, the worker's lone total split 70/30
    assert weather.scores["reference:IT"] == 100 + 35 + 30 and weather.scores["reference:OT"] == 20 + 15 + 10
    assert weather.scores["paper:IE"] is None  # the upstream planner writes no constraint object
    assert poi.status == "failed" and poi.error_category == "engine_error"
    assert poi.scores["reference:FPR"] is None  # an errored case drops out of the reference's answer table
    rep = runner.invoke(app, ["report", str(run), "--html"])
    assert rep.exit_code == 0, rep.output
    assert "upstream-model" in rep.output and (run / "report.html").is_file()
    exp = runner.invoke(app, ["export", str(run), "--format", "csv", "--out", str(tmp_path / "e.csv")])
    assert exp.exit_code == 0, exp.output
    assert len((tmp_path / "e.csv").read_text(encoding="utf-8").strip().splitlines()) == 3


def test_mobilitybench_unknown_case_is_refused(tmp_path: Path) -> None:
    data = _mobility_csv(tmp_path)
    raw = _write(tmp_path / "raw_results.json", [{"case_id": "case_9"}])
    with pytest.raises(RescoreError, match=re.escape("raw_results.json: record 0, field case_id: 'case_9'")):
        rescore(
            RescoreOptions(
                scorer="mobilitybench",
                predictions=[raw],
                data=data,
                options={"similarity": "jaccard"},
                out=tmp_path / "runs",
            )
        )


def test_mobilitybench_without_tool_results_paper_delivery_is_not_measured(tmp_path: Path) -> None:
    data, raw = _mobility_csv(tmp_path), _raw_results(tmp_path)
    rows = json.loads(raw.read_text(encoding="utf-8"))
    del rows[0]["worker_output"][0]["tool_results"]
    _write(raw, rows)
    run = rescore(
        RescoreOptions(
            scorer="mobilitybench",
            predictions=[raw],
            data=data,
            options={"similarity": "jaccard"},
            out=tmp_path / "runs",
        )
    )
    weather = next(r for r in read_results(run / "results.sqlite") if r.episode_id == "case_1")
    assert weather.scores["paper:DR"] is None and weather.scores["paper:FPR"] is None
    assert weather.scores["reference:DR"] == 1.0  # the reference reads the answer text only


def test_tool_answers_are_read_as_the_sandbox_and_the_worker_write_them() -> None:
    from rig.benchmarks.mobilitybench.rescore import _answer_ok

    ok = {"status": 0, "data": {"weather_description": "晴"}, "error": None}
    failed = {"status": 1, "data": {}, "error": "POI '甲' 在沙盒中未找到"}
    assert _answer_ok(json.dumps(ok, ensure_ascii=False)) and _answer_ok(ok)
    assert not _answer_ok(json.dumps(failed, ensure_ascii=False)) and not _answer_ok(failed)
    assert _answer_ok("{'status': <ToolStatus.SUCCESS: 0>, 'data': {'name': '甲'}, 'error': None}")
    assert not _answer_ok("{'status': <ToolStatus.FAILED: 1>, 'data': {}, 'error': '未找到'}")
    assert not _answer_ok("Tool driving_route execution failed: 1 validation error")
    assert not _answer_ok("Unknown tool: get_route") and not _answer_ok("Error: invalid arguments")
    assert _answer_ok("步行路线：全程800米")
    # a damaged answer in the file is read as text, never a traceback
    assert _answer_ok("[" * 5000) and _answer_ok('{"status": 0, "data": ' + "[" * 5000)


def _rescore_one(tmp: Path, rows: list[dict], mode: str = "paper", similarity: str = "jaccard") -> dict:
    tmp.mkdir(exist_ok=True)
    data = _mobility_csv(tmp)
    raw = _write(tmp / "raw_results.json", rows)
    run = rescore(
        RescoreOptions(
            scorer="mobilitybench",
            predictions=[raw],
            data=data,
            mode=mode,  # type: ignore[arg-type]
            options={"similarity": similarity},
            out=tmp / "runs",
        )
    )
    return {r.episode_id: r for r in read_results(run / "results.sqlite")}


def _poi_record(workers: list[dict]) -> dict:
    return {
        "case_id": "case_2",
        "planner_output": {"thinking": "查颐和园", "intent": "地点查询", "steps": [["查询颐和园"], ["再查一次"]]},
        "worker_output": workers,
        "reporter_output": "颐和园位于116.27,39.99",
        "token_usage": {},
        "error": None,
    }


def test_paper_mode_reads_the_tool_results_and_counts_a_repeated_call_twice(tmp_path: Path) -> None:
    ok = json.dumps({"status": 0, "data": {"name": "颐和园", "location": "116.27,39.99"}, "error": None})
    q = {"name": "query_poi", "args": {"keywords": "颐和园"}}
    # two plan steps each calling the same tool with the same arguments; the second record repeats the first call
    workers = [
        {"tool_calls": [{"id": "a", **q}], "tool_results": {"a": ok}},
        {"tool_calls": [{"id": "a", **q}, {"id": "b", **q}], "tool_results": {"a": ok, "b": ok}},
    ]
    poi = _rescore_one(tmp_path, [_poi_record(workers)])["case_2"]
    assert poi.scores["paper:DR"] == 1.0  # measured: the answers say the calls succeeded
    assert poi.scores["paper:TS_R"] == 0.5  # two calls, one beyond the one-call program (one id: 1.0)
    assert poi.scores["reference:TS_R"] == 1 - 0.6667  # rows a | a b, as the evaluator reads them
    failed = json.dumps({"status": 1, "data": {}, "error": "POI '颐和园' 在沙盒中未找到"}, ensure_ascii=False)
    workers[1]["tool_results"] = {"a": ok, "b": failed}
    poi = _rescore_one(tmp_path / "f", [_poi_record(workers)])["case_2"]
    assert poi.scores["paper:DR"] == 0.0  # a failed call never recovered


def test_reference_mode_uses_the_references_similarity(tmp_path: Path) -> None:
    rows = [
        {
            "case_id": "case_1",
            "planner_output": {"thinking": "查北京明天天气", "intent": "天气查询", "steps": [["查询北京明天天气"]]},
            "worker_output": [],
            "reporter_output": "北京市明天晴，气温12摄氏度",
            "token_usage": {},
            "error": None,
        }
    ]
    # the paper-mode backend lower-cases; the reference's fallback does not, and is the one reference mode uses
    weather = _rescore_one(tmp_path / "a", rows, "reference", "jaccard-lower")["case_1"]
    assert weather.tags["similarity_model"] == "char-jaccard-lower"
    assert weather.tags["reference_similarity_model"] == "char-jaccard"
    from rig.benchmarks.mobilitybench.tables import mobility_tables

    ref_table = next(t for t in mobility_tables([weather], "m") if "reference metric mode" in t.title)
    assert "Jaccard unless a model directory): char-jaccard." in (ref_table.note or "")


# -- hostile inputs (issue 30): each is exit 2 with one line naming the file and the field, and nothing written ----


def _weather(**over: object) -> dict:
    row: dict = {
        "case_id": "case_1",
        "model_name": "upstream-model",
        "planner_output": {"thinking": "查北京明天天气", "intent": "天气查询", "steps": [["查询北京明天天气"]]},
        "worker_output": [{"tool_calls": [{"id": "1", "name": "weather_query", "args": {"city": "北京市"}}]}],
        "reporter_output": "北京市明天晴",
        "token_usage": {"planner": {"prompt_tokens": 10, "completion_tokens": 2}},
        "error": None,
    }
    row.update(over)
    return row


def _refused(tmp: Path, args: list[str], *expected: str) -> None:
    res = runner.invoke(app, [*args, "--out", str(tmp / "runs")])
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output
    for e in expected:
        assert e in res.output, res.output
    assert not (tmp / "runs").exists()  # nothing written for bad input


@pytest.mark.parametrize(
    ("field", "row"),
    [
        ("token_usage.planner.prompt_tokens", _weather(token_usage={"planner": {"prompt_tokens": float("nan")}})),
        ("token_usage.planner.prompt_tokens", _weather(token_usage={"planner": {"prompt_tokens": float("inf")}})),
        ("token_usage.worker.completion_tokens", _weather(token_usage={"worker": {"completion_tokens": "12"}})),
        ("token_usage.reporter.total_tokens", _weather(token_usage={"reporter": {"total_tokens": "many"}})),
        ("token_usage.planner", _weather(token_usage={"planner": "100 tokens"})),
        ("token_usage", _weather(token_usage="100 tokens")),
        ("worker_output[0].tool_calls", _weather(worker_output=[{"tool_calls": 3}])),
    ],
)
def test_mobilitybench_bad_fields_are_refused_naming_the_field(tmp_path: Path, field: str, row: dict) -> None:
    data = _mobility_csv(tmp_path)
    raw = tmp_path / "raw_results.json"
    raw.write_text(json.dumps([row]), encoding="utf-8")  # json writes NaN / Infinity as the harness would
    args = ["rescore", "mobilitybench", str(raw), "--data", str(data), "-O", "similarity=jaccard"]
    _refused(tmp_path, args, f"raw_results.json: record 0, field {field}:")


def test_prediction_file_nested_past_the_parsers_depth_is_refused(tmp_path: Path) -> None:
    data = _mobility_csv(tmp_path)
    deep = tmp_path / "raw_results.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    args = ["rescore", "mobilitybench", str(deep), "--data", str(data), "-O", "similarity=jaccard"]
    _refused(tmp_path, args, "raw_results.json: not readable JSON (nested past the parser's depth)")
    # parsed, but deeper than any record: refused before a recursive walk (scoring, storing) meets it
    _write(deep, [_weather(planner_output={"intent": "x", "steps": json.loads("[" * 900 + "]" * 900)})])
    _refused(tmp_path, args, "raw_results.json: [0].planner_output.steps", "nested more than 64 deep")
    files, *_ = _callnavi_files(tmp_path)
    files[0].write_text("[" * 50_000 + "]" * 50_000, encoding="utf-8")
    _refused(tmp_path, ["rescore", "callnavi", str(files[0])], "maps_1_APIonly_mymodel.json: not readable JSON")


def test_tool_result_and_deep_answers_are_read_as_text(tmp_path: Path) -> None:
    from rig.benchmarks.mobilitybench.rescore import _answer_ok

    # `{{` made repair_literal raise TypeError (a dict inside a set); the answer is text that is not a failure
    assert _answer_ok("{{'status': 0}}") and _answer_ok("{{") and _answer_ok("{[1]: 2}")
    deep = '{"status": 0, "data": ' + "[" * 100_000
    row = _weather(
        worker_output=[
            {
                "tool_calls": [{"id": "1", "name": "weather_query", "args": {}}],
                "tool_results": {"1": "{{'status': 1}}" + deep},
            }
        ]
    )
    weather = _rescore_one(tmp_path, [row])["case_1"]
    assert weather.scores["paper:DR"] == 1.0  # read as a text answer, not as a failed call


def test_callnavi_huge_or_broken_ground_truth_is_refused_naming_the_field(tmp_path: Path) -> None:
    files, *_ = _callnavi_files(tmp_path)
    rows = json.loads(files[1].read_text())
    for bad, why in [
        ("[" * 100_000, "100,000 characters, over 20,000"),
        ("{{'API': []}}", "not a Python literal"),
        ("[" * 150 + "]" * 150, "nested more than 64 deep"),
    ]:
        rows[0]["ground_truth"] = bad
        _write(files[1], rows)
        _refused(tmp_path, ["rescore", "callnavi", str(files[1])], "record 0, field ground_truth:", why)


def test_long_label_or_model_name_makes_a_run_folder(tmp_path: Path) -> None:
    files, n, *_ = _callnavi_files(tmp_path)
    long_model = "m" * 200  # the longest a file name allows beside the domain, iteration and task
    renamed = [f.rename(f.with_name(f.name.replace("mymodel", long_model))) for f in files]
    res = runner.invoke(app, ["rescore", "callnavi", *map(str, renamed), "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    (run,) = (tmp_path / "a").iterdir()
    assert (
        len(run.name.encode()) < 255
        and json.loads((run / "manifest.json").read_text())["config"]["model"]["name"] == long_model
    )  # the full name is kept in the manifest
    label = "L/" + "é" * 300
    res = runner.invoke(
        app, ["rescore", "callnavi", *map(str, renamed), "--label", label, "--out", str(tmp_path / "b")]
    )
    assert res.exit_code == 0, res.output
    (run,) = (tmp_path / "b").iterdir()
    assert len(run.name.encode()) < 255 and "/" not in run.name
    assert len(read_results(run / "results.sqlite")) == 2 * n


def test_predictions_of_two_models_are_refused(tmp_path: Path) -> None:
    files, *_ = _callnavi_files(tmp_path)
    other = files[1].with_name("maps_0_para_othermodel.json")
    other.write_text(files[1].read_text())
    _refused(tmp_path, ["rescore", "callnavi", str(files[0]), str(other)], "predictions of 2 models", "othermodel")
    data = _mobility_csv(tmp_path)
    raw = _write(tmp_path / "raw_results.json", [_weather(), {**_weather(case_id="case_2"), "model_name": "b"}])
    args = ["rescore", "mobilitybench", str(raw), "--data", str(data), "-O", "similarity=jaccard"]
    _refused(tmp_path, args, "raw_results.json: predictions of 2 models ('b', 'upstream-model')")


def test_mobilitybench_rescore_is_plan_and_execute_with_its_calls_and_unreported_tokens(tmp_path: Path) -> None:
    no_usage = _weather(case_id="case_2", token_usage={})
    by_id = _rescore_one(tmp_path, [_weather(), no_usage])
    weather, poi = by_id["case_1"], by_id["case_2"]
    assert weather.tags["framework"] == poi.tags["framework"] == "plan"
    assert [c.name for c in weather.tool_calls] == ["weather_query"]
    assert weather.scores["paper:IT"] == 10 and weather.scores["paper:OT"] == 2
    assert poi.scores["paper:IT"] is None and poi.scores["paper:OT"] is None  # not reported, never 0
    from rig.benchmarks.mobilitybench.tables import mobility_tables

    (table,) = [t for t in mobility_tables([weather, poi], "m") if t.title.startswith("MobilityBench tokens")]
    (row,) = table.rows
    assert row[0] == "Plan-and-Execute" and row[-1] == 1.0  # one tool call per episode, not 0
    (tmp_path / "x").mkdir()
    data = _mobility_csv(tmp_path / "x")
    raw = _write(tmp_path / "x" / "raw_results.json", [_weather()])
    args = [
        "rescore",
        "mobilitybench",
        str(raw),
        "--data",
        str(data),
        "-O",
        "similarity=jaccard",
        "-O",
        "framework=react",
    ]
    _refused(tmp_path / "x", args, "-O framework=react")


def test_report_on_long_replies_uses_the_bounded_stability_score(tmp_path: Path) -> None:
    # two iterations of replies longer than the Levenshtein cap, equal up to it: stability 1.0 and said so
    from rig.scoring.stability import LEV_MAX_CHARS

    qs = _callnavi_questions()
    files = [
        _write(tmp_path / f"maps_{it}_para_m.json", [{"predict": "a" * LEV_MAX_CHARS + "xy"[it] * 200_000} for _ in qs])
        for it in (0, 1)
    ]
    run = rescore(RescoreOptions(scorer="callnavi", predictions=files, out=tmp_path / "runs"))
    rep = runner.invoke(app, ["report", str(run)])
    assert rep.exit_code == 0, rep.output
    assert f"| m | params | {len(qs)} | 0.000 | 1.000 |" in rep.output  # election: two different replies, a tie
    assert f"compares the first {LEV_MAX_CHARS:,} characters of each normalised output" in " ".join(rep.output.split())


@pytest.mark.parametrize(
    "name", ["rescore_file", "rescore_mobility_record", "rescore_callnavi_gt", "callnavi_data", "mobilitybench_data"]
)
def test_file_readers_take_the_issue_inputs_without_a_traceback(name: str) -> None:
    # scripts/fuzz_readers.py --files runs these readers on 10,000 inputs each; here the inputs issue 30 named
    from tests.readers import DATA_READERS, DATA_REGRESSIONS

    for text in DATA_REGRESSIONS:
        out = DATA_READERS[name](text)  # a RescoreError / DataError comes back as text; anything else raises here
        assert out is None or isinstance(out, str)


def test_label_with_markup_and_out_a_file_are_handled(tmp_path: Path) -> None:
    files, *_ = _callnavi_files(tmp_path)
    res = runner.invoke(app, ["rescore", "callnavi", *map(str, files), "--label", "x[b]", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0 and "x[b]" in res.output, (res.output, res.exception)  # not swallowed as markup
    (tmp_path / "file").write_text("")
    res = runner.invoke(app, ["rescore", "callnavi", *map(str, files), "--out", str(tmp_path / "file")])
    assert res.exit_code == 2 and "--out" in res.output and "cannot create the run folder" in res.output, res.output
    assert (tmp_path / "file").read_text() == ""


def test_reference_rescore_never_loads_minilm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rig.benchmarks.mobilitybench import similarity

    def refuse(self: object) -> None:
        raise AssertionError("the MiniLM model was loaded")

    monkeypatch.setattr(similarity.EmbeddingBackend, "_load", refuse)
    monkeypatch.setattr(similarity.EmbeddingBackend, "check", lambda self: None)
    # an intent that is no scenario name or alias: paper-mode ID compares it by similarity
    planner = {"thinking": "查天气", "intent": "问问明天会不会下雨", "steps": [["查询北京明天天气"]]}
    data, raw = _mobility_csv(tmp_path), _write(tmp_path / "raw_results.json", [_weather(planner_output=planner)])
    opts = RescoreOptions(scorer="mobilitybench", predictions=[raw], data=data, mode="reference", out=tmp_path / "r")
    weather = next(r for r in read_results(rescore(opts) / "results.sqlite") if r.episode_id == "case_1")
    assert weather.tags["similarity_model"] == weather.tags["reference_similarity_model"] == "char-jaccard"
    assert weather.scores["paper:ID"] is not None
    # asked for by name, the paper table's MiniLM is used (and here refused by the patch)
    with pytest.raises(AssertionError, match="MiniLM model was loaded"):
        rescore(opts.model_copy(update={"options": {"similarity": "minilm"}, "out": tmp_path / "m"}))


@pytest.fixture
def scorer_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tests/execution/plugins/ installed: three `rig.scorers` entries of one distribution."""
    from rig import plugins

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "plugins"))
    plugins.discover.cache_clear()
    yield
    plugins.discover.cache_clear()


def test_a_plugin_scorer_rescores_a_builtin_benchmark(tmp_path: Path, scorer_plugins: None) -> None:
    """rescore knows no benchmark by name: a package's `rig.scorers` entry reads its own file format for RouteEval
    (which rig reads no prediction files of) through the same command, into a normal run folder."""
    from rig.benchmarks.routeeval.benchmark import RouteEval
    from rig.execution.rescore import rescorable

    assert rescorable()[:2] == ["callnavi", "mobilitybench"] and "routefile" in rescorable()
    refused = runner.invoke(app, ["rescore", "routeeval", str(tmp_path / "p.json"), "--out", str(tmp_path / "r")])
    assert refused.exit_code == 2 and "no scorer 'routeeval'; choose callnavi or mobilitybench or" in refused.output
    first, second = (e.id for e in RouteEval(None).episodes()[:2])
    preds = _write(tmp_path / "p.json", {"model": "their-model", "answers": {first: "ok", second: "no"}})
    res = runner.invoke(app, ["rescore", "routefile", str(preds), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    (run,) = (tmp_path / "r").iterdir()
    stored = {r.episode_id: r.scores["accuracy"] for r in read_results(run / "results.sqlite")}
    assert "their-model" in run.name and stored == {first: 1.0, second: 0.0}
    manifest = json.loads((run / "manifest.json").read_text())
    assert "routefile (tests.execution.scorers:RouteFile) from rig-test-scorers 0.1" in json.dumps(manifest)


@pytest.mark.parametrize(
    ("scorer", "says"),
    [
        (
            "crashscorer",
            "scorer plugin 'crashscorer' (tests.execution.scorers:Crash) from rig-test-scorers 0.1: "
            "raised RuntimeError: this plugin's reader broke",
        ),
        (
            "orphan",
            "scorer plugin 'orphan' (tests.execution.scorers:Orphan) from rig-test-scorers 0.1: scores "
            "benchmark 'no-such-benchmark', which is not installed",
        ),
    ],
)
def test_a_plugin_scorer_that_raises_exits_2_naming_it_and_the_builtins_still_run(
    scorer: str, says: str, tmp_path: Path, scorer_plugins: None
) -> None:
    preds = _write(tmp_path / "p.json", {"model": "m", "answers": {}})
    r = runner.invoke(app, ["rescore", scorer, str(preds), "--out", str(tmp_path / "r")])
    assert r.exit_code == 2 and says in " ".join(r.output.split()), r.output
    assert not (tmp_path / "r").exists()  # refused before any run folder
    files, *_ = _callnavi_files(tmp_path)
    ok = runner.invoke(app, ["rescore", "callnavi", *map(str, files), "--out", str(tmp_path / "c")])
    assert ok.exit_code == 0, ok.output
