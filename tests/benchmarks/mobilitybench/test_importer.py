"""MobilityBench importer: a file in the upstream format (Python-literal cells, a cell cut at the spreadsheet limit,
a malformed row) and upstream-style sandbox files, written here by the test."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest

from rig.benchmarks import get_benchmark_class
from rig.benchmarks.base import DataError, RunContext
from rig.benchmarks.mobilitybench import scoring as M
from rig.benchmarks.mobilitybench.importer import CELL_LIMIT, load_upstream, parse_cell, sandbox_entries
from rig.benchmarks.mobilitybench.similarity import CharJaccard
from rig.records import Sampling
from tests.fakes import FakeEngine

COLS = [
    "query",
    "context",
    "task_scenario",
    "intent_family",
    "strategy_list",
    "query_start_poi",
    "query_end_poi",
    "std_end",
    "city",
    "tool_list",
    "route_ans",
    "weather",
    "weather_description",
    "time",
    "ans_loc",
    "poi_result",
    "matched_transit_index",
    "duration",
]
LOC = "123.779300,41.306982"
DEST = "122.509006,40.644482"


def _rows() -> list[dict[str, str]]:
    big_route = (
        "{'status': '1', 'route': {'paths': [{'distance': '152000', 'steps': ["
        + ", ".join(f"{{'instruction': '向西行驶{i}米', 'road_name': '沈丹高速'}}" for i in range(2000))
        + "]}]}}"
    )
    assert len(big_route) > CELL_LIMIT
    return [
        {
            "query": "去大石桥不走高速",
            "context": f"{{'user_current_location': '{LOC}', 'city': '本溪市'}}",
            "task_scenario": "Option-Constrained Route Planning",
            "intent_family": "Preference-Constrained Route Planning",
            "strategy_list": "['不走高速']",
            "query_end_poi": "大石桥",
            "std_end": f"{{'name': '大石桥市', 'location': '{DEST}'}}",
            "city": "本溪市",
            "tool_list": f"[{{'name': 'query_poi', 'arguments': {{'keywords': '大石桥', 'city': '本溪市'}}}}, "
            f"{{'name': 'driving_route', 'arguments': {{'origin': '{LOC}', 'destination': '{DEST}', "
            f"'strategy': ['不走高速']}}}}]",
            "route_ans": big_route[:CELL_LIMIT],
        },  # cut at the Excel cell limit, as 15 sample cells are
        {
            "query": "淮安今天天气怎么样",
            "context": "{'user_current_location': '119.0,33.6', 'city': '淮安市'}",
            "task_scenario": "Weather Query",
            "intent_family": "Basic Information Retrieval",
            "city": "淮安市",
            "time": "今天",
            "weather_description": "淮安市当前天气多云，气温-4℃",
            "tool_list": "[{'name': 'weather_query', 'arguments': {'city': '淮安市', 'need_forecast': False}}]",
            "weather": "{'status': <ToolStatus.SUCCESS: 0>, 'data': {'weather_description': '多云'}}",
        },
        {"query": "", "context": "{}", "task_scenario": "Weather Query", "tool_list": "[]"},  # malformed: no query
        {
            "query": "长乐西路在哪",
            "context": "{'user_current_location': '108.9,34.2', 'city': '西安市'}",
            "task_scenario": "POI Query",
            "intent_family": "Basic Information Retrieval",
            "tool_list": "[{'name': 'query_poi', 'arguments': {'keywords': '长乐西路'}}]",
            "ans_loc": "108.985031,34.269410",
            "poi_result": "{'status': <ToolStatus.SUCCESS: 0>, 'data': {'location': '108.985031,34.269410', "
            "'name': '长乐西路', 'address': '西安市'}, 'error': None}",
        },
        {
            "query": "坐地铁去",
            "context": "not a dict",
            "task_scenario": "Route-Constrained Planning",
            "tool_list": "[]",
        },  # malformed: context
    ]


@pytest.fixture()
def upstream_csv(tmp_path: Path) -> Path:
    path = tmp_path / "sample.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        for r in _rows():
            w.writerow(r)
    return path


def test_parse_cell_rules() -> None:
    assert parse_cell("{'a': True}") == {"a": True}
    assert parse_cell('{"a": 1}') == {"a": 1}
    assert parse_cell("108.985031,34.269410") == (108.985031, 34.26941)  # the loader's tuple
    assert parse_cell("<ToolStatus.SUCCESS: 0>") == "<ToolStatus.SUCCESS: 0>"  # stays text
    assert parse_cell("") is None and parse_cell(float("nan")) is None


def test_import_reports_truncated_and_malformed(upstream_csv: Path) -> None:
    cases, rep = load_upstream(upstream_csv)
    assert rep.rows == 5 and rep.cases == 3
    assert rep.truncated == [("case_1", "route_ans")]
    assert [n for n, _ in rep.malformed] == [3, 5]
    assert "no query" in rep.malformed[0][1] and "context" in rep.malformed[1][1]
    opt, weather, poi = cases
    assert [c.id for c in cases] == ["case_1", "case_2", "case_4"]  # ids follow data rows
    assert opt.context["user_current_location"] == LOC and opt.truth.lang == "zh"
    assert isinstance(opt.truth.slots["route_ans"], str)  # the cut cell stays text
    assert opt.truth.checks.route == {
        "tool": "driving_route",
        "origin": LOC,
        "destination": DEST,
        "waypoints": [],
        "strategy": ["不走高速"],
    }
    assert {(c.slot, c.values[0]) for c in opt.truth.constraints} == {
        ("destination", "大石桥"),
        ("preferences", "avoid_highways"),
    }
    assert weather.truth.checks.similar == "淮安市当前天气多云，气温-4℃"
    assert poi.truth.checks.places == ["长乐西路"] and poi.truth.checks.coord["lat"] == pytest.approx(34.26941)
    # The repaired truncated literal is usable by the answer rules (general type reads route_ans).
    fixed = M.repair_literal(opt.truth.slots["route_ans"])
    assert fixed["route"]["paths"][0]["distance"] == "152000"


def test_xlsx_imports_like_csv(upstream_csv: Path, tmp_path: Path) -> None:
    """The upstream dataset also ships as XLSX: the same rows import to the same cases and the same report."""
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    ws = wb.active
    with upstream_csv.open(newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            ws.append([int(c) if c.isdigit() else c for c in row])  # Excel keeps numbers as numbers
    xlsx = tmp_path / "sample.xlsx"
    wb.save(xlsx)
    got, got_rep = load_upstream(xlsx)
    want, want_rep = load_upstream(upstream_csv)
    assert [c.model_dump() for c in got] == [c.model_dump() for c in want]
    assert (got_rep.rows, got_rep.cases, got_rep.truncated, got_rep.malformed) == (
        want_rep.rows,
        want_rep.cases,
        want_rep.truncated,
        want_rep.malformed,
    )


def test_imported_cases_score_in_reference_mode(upstream_csv: Path) -> None:
    cases, _ = load_upstream(upstream_csv)
    opt, weather, _poi = cases
    fence = (
        "```json\n" + json.dumps({"route_index": "0", "content": "不走高速，全程152公里"}, ensure_ascii=False) + "\n```"
    )
    s = M.score(
        M.Prediction(
            intent="有偏好的路线规划",
            thinking="去大石桥",
            steps=["查询大石桥坐标", "进行不走高速的路线规划"],
            calls=[
                M.Call(name=t["name"], arguments=t["arguments"], ok=True, task=i)
                for i, t in enumerate(opt.truth.tool_list)
            ],
            report=fence,
        ),
        opt.truth,
        "reference",
        CharJaccard(),
        cumulative=True,
    )
    assert s["ID"] == 1.0 and s["IE"] == 1.0 and s["DEC_P"] == 0.5 and s["DEC_R"] == 1.0
    assert s["TS_P"] == 1.0 and s["TS_R"] == pytest.approx(0.6667) and s["DR"] == 1.0 and s["FPR"] == 1.0
    w = M.score(
        M.Prediction(intent="天气查询", content="淮安市当前天气多云，气温-4℃"),
        weather.truth,
        "reference",
        CharJaccard(),
    )
    assert (w["DR"], w["FPR"]) == (1.0, 1.0)


def _write_sandbox(d: Path) -> None:
    d.mkdir()
    (d / "nested_poi_data.json").write_text(
        json.dumps(
            {"大石桥": {"营口市": {"location": DEST, "name": "大石桥市", "address": "营口市"}}}, ensure_ascii=False
        )
    )
    route = {"status": "1", "route": {"paths": [{"distance": "152000", "cost": {"duration": "6000"}, "steps": []}]}}
    (d / "driving_route_handle.json").write_text(
        json.dumps({DEST: {LOC: {"不走高速": {"default": route}}}}, ensure_ascii=False)
    )
    (d / "weather_sandbox.json").write_text(
        json.dumps({"淮安市": {"False": {"weather_description": "多云"}}}, ensure_ascii=False)
    )
    (d / "reverse_geocoding_sandbox.json").write_text(json.dumps({"34.2,108.9": "西安市雁塔区"}, ensure_ascii=False))


def test_sandbox_files_replay(upstream_csv: Path, tmp_path: Path) -> None:
    sb = tmp_path / "sandbox"
    _write_sandbox(sb)
    entries, missing = sandbox_entries(sb)
    assert {e[0] for e in entries} == {"query_poi", "driving_route", "weather_query", "reverse_geocoding"}
    assert "bus_route_mock.json" in missing
    bench = get_benchmark_class("mobilitybench")(upstream_csv, {"similarity": "jaccard", "sandbox_dir": str(sb)})
    svc = bench.service()
    assert svc.call("query_poi", {"keywords": "大石桥", "city": "本溪市"}).data["data"]["name"] == "大石桥市"
    r = svc.call("driving_route", {"origin": "123.7793,41.306982", "destination": DEST, "strategy": ["不走高速"]})
    assert r.ok and r.source == "hit" and r.data["data"]["route"]["paths"][0]["distance"] == "152000"
    near = svc.call("driving_route", {"origin": "123.7797,41.3072", "destination": DEST, "strategy": ["不走高速"]})
    assert near.ok and near.source == "fuzzy"  # within 100 m: labelled fallback
    assert (
        svc.call("reverse_geocoding", {"longitude": "108.9", "latitude": "34.2"}).data["data"]["address"]
        == "西安市雁塔区"
    )
    miss = svc.call("traffic_status", {"name": "成都大道", "city": "成都"})
    assert not miss.ok and miss.error_category == "replay_miss"

    # An oracle run on the imported cases ends with scores for every episode.
    eps = bench.episodes()
    assert len(eps) == 3 and bench.import_report.malformed

    def answer(req):  # type: ignore[no-untyped-def]
        q = next(m.content for m in req.messages if m.role == "user")
        ep = next(e for e in eps if e.messages[0].content == q)
        prog = ep.ground_truth["truth"]["tool_list"]
        done = sum(1 for m in req.messages if m.role == "user" and m.content.startswith("Result of "))
        if done < len(prog):
            return json.dumps({"name": prog[done]["name"], "arguments": prog[done]["arguments"]}, ensure_ascii=False)
        return json.dumps(
            {
                "name": "final_answer",
                "arguments": {
                    "answer": "全程152公里，约100分钟的路线",
                    "intent": ep.tags["scenario"],
                    "constraints": {},
                    "route_index": 0,
                },
            },
            ensure_ascii=False,
        )

    ctx = RunContext(sampling=Sampling(), tool_mode="json")
    results = [asyncio.run(bench.run_episode(e, FakeEngine(answer=answer), ctx, 0)) for e in eps]
    assert all(r.status == "scored" for r in results)
    assert results[0].scores["DR"] == 1.0 and results[0].scores["FPR"] == 1.0  # the route episode replays fully


def _write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return path


def test_duplicate_case_id_is_refused_naming_file_and_id(tmp_path: Path) -> None:
    rows = [{**r, "case_id": cid} for r, cid in zip(_rows(), ["a", "b", "c", "a", "e"], strict=True)]
    path = _write_rows(tmp_path / "dup.csv", rows)
    with pytest.raises(DataError, match=rf"{path}: row 4, field case_id: duplicate case id 'a' \(also row 1\)"):
        load_upstream(path)


def test_cells_with_unbalanced_braces_or_deep_nesting_never_raise(tmp_path: Path) -> None:
    assert parse_cell("{{'a': 1}}") == "{{'a': 1}}"  # a dict inside a set: TypeError in ast.literal_eval
    deep = "[" * 200 + "]" * 200
    assert parse_cell(deep) == deep and parse_cell("[" * 100_000) == "[" * 100_000  # kept as text
    weather, poi = _rows()[1], _rows()[3]
    rows = [
        {**poi, "poi_result": "{{'data': {'name': '长乐西路'}}}"},  # unbalanced: text, the row still imports
        {**weather, "context": "{{'user_current_location': '119.0,33.6'}"},  # unbalanced: the row is malformed
        {**poi, "poi_result": "{'status': 0, 'data': {1, 2}}"},  # a set where an object belongs: malformed
        {**weather, "tool_list": "[{'name': 'weather_query'", "weather": "}}{{"},
        {**_rows()[0], "route_ans": "{{'route': }}{'paths': [{'distance': 5}]", "matched_transit_index": "inf"},
        {**poi, "poi_result": "{'data': " + "[" * 300 + "]" * 300 + "}"},  # a list where an object belongs
    ]
    cases, rep = load_upstream(_write_rows(tmp_path / "braces.csv", rows))
    # reported and skipped with the reason, never a traceback
    assert rep.cases + len(rep.malformed) == len(rows) and [n for n, _ in rep.malformed] == [2, 3, 4, 6]
    assert "AttributeError: 'set' object has no attribute 'get'" in rep.malformed[1][1]
    pred = M.Prediction(intent="x", steps=["a"], report="长乐西路 108.98,34.27", content="长乐西路", delivered=True)
    for c in cases:
        for mode in M.MODES:
            M.score(pred, c.truth, mode, CharJaccard())  # scoring the odd truths never raises either


def test_rescore_data_with_unbalanced_braces_exits_0(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    weather = {**_rows()[1], "weather": "{{'status': 0}}", "context": "{'user_current_location': '119.0,33.6'}}}"}
    data = _write_rows(tmp_path / "d.csv", [_rows()[1], weather])
    raw = tmp_path / "raw_results.json"
    raw.write_text(json.dumps([{"case_id": "case_1", "reporter_output": "多云", "error": None}]), encoding="utf-8")
    args = ["rescore", "mobilitybench", str(raw), "--data", str(data), "-O", "similarity=jaccard"]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0 and "Traceback" not in res.output, (res.output, res.exception)
