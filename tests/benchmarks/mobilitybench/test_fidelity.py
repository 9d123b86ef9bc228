"""MobilityBench fidelity on upstream-format rows written here (issue 19): the Traffic answer check."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rig.benchmarks.mobilitybench import scoring as M
from rig.benchmarks.mobilitybench.importer import load_upstream
from rig.benchmarks.mobilitybench.scoring.text import stated_traffic, traffic_truth
from rig.benchmarks.mobilitybench.similarity import CharJaccard

COLS = ["query", "context", "task_scenario", "intent_family", "city", "road", "tool_list", "ans"]
CLEAR = (
    "{'status': '1', 'info': 'OK', 'trafficinfo': {'description': '示例大道：双向畅通。', 'evaluation': "
    "{'expedite': '100.00%', 'congested': '0.00%', 'blocked': '0.00%', 'unknown': '0.00%', 'status': '1', "
    "'description': '畅通'}, 'roads': [{'name': '示例大道', 'status': '1'}]}}"
)


def _csv(tmp_path: Path, ans: str) -> Path:
    path = tmp_path / "traffic.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLS)
        w.writeheader()
        w.writerow(
            {
                "query": "示例大道现在堵不堵",
                "context": "{'user_current_location': '116.4,39.9', 'city': '北京市'}",
                "task_scenario": "Traffic Info Query",
                "intent_family": "Basic Information Retrieval",
                "city": "北京市",
                "road": "示例大道",
                "tool_list": "[{'name': 'traffic_status', 'arguments': {'name': '示例大道', 'city': '北京市'}}]",
                "ans": ans,
            }
        )
    return path


def test_traffic_status_is_read_from_the_amap_cell_even_when_cut(tmp_path: Path) -> None:
    for ans in (CLEAR, CLEAR[: CLEAR.index("'roads'")]):  # whole, and cut mid-cell as a spreadsheet limit cuts it
        (case,), _ = load_upstream(_csv(tmp_path, ans))
        assert isinstance(case.truth.slots["ans"], dict)
        assert case.truth.checks is not None and case.truth.checks.traffic == "clear"


def test_traffic_answer_must_state_the_datas_status(tmp_path: Path) -> None:
    (case,), _ = load_upstream(_csv(tmp_path, CLEAR))
    call = M.Call(name="traffic_status", arguments={"name": "示例大道", "city": "北京市"}, ok=True, task=0)

    def pred(text: str) -> M.Prediction:
        return M.Prediction(intent="路况查询", content=text, calls=[call], delivered=True)

    for mode in ("paper", "reference"):
        good = M.score(pred("示例大道目前双向畅通，通行顺畅。"), case.truth, mode, CharJaccard())
        bad = M.score(pred("示例大道目前严重拥堵，双向通行缓慢。"), case.truth, mode, CharJaccard())
        assert good["DR"] == bad["DR"] == 1.0, mode
        assert good["FPR"] == 1.0, mode
        assert bad["FPR"] == 0.0, mode  # the road is clear; before issue 19 paper mode scored this 1.0


def test_traffic_answers_are_read_with_their_negations(tmp_path: Path) -> None:
    """Paper mode reads "not clear" as not clear: a jammed answer that also says 不畅通 must not pass on a clear
    road, and "不拥堵" states a clear one (the word alone read as a jam)."""
    (case,), _ = load_upstream(_csv(tmp_path, CLEAR))
    call = M.Call(name="traffic_status", arguments={"name": "示例大道", "city": "北京市"}, ok=True, task=0)

    def fpr(text: str) -> float | None:
        pred = M.Prediction(intent="路况查询", content=text, calls=[call], delivered=True)
        return M.score(pred, case.truth, "paper", CharJaccard())["FPR"]

    assert fpr("示例大道拥堵严重，不畅通。") == 0.0
    assert fpr("The road is not clear: heavy jams.") == 0.0
    assert fpr("示例大道目前不拥堵。") == 1.0
    assert fpr("No congestion on 示例大道 right now.") == 1.0


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("没有出现拥堵，双向畅通", {"clear"}),
        ("不太拥堵", {"clear"}),
        ("拥堵严重，不畅通", {"slow", "congested"}),
        ("Traffic is not heavily congested", {"clear"}),
        ("There are no jams", {"clear"}),
        ("It isn't slow", {"clear"}),
        ("No, it's jammed", {"congested"}),  # the negation ends with its clause
        ("The road is clearly jammed", {"congested"}),  # "clearly" states no clear road
        ("The situation is unclear", set()),
    ],
)
def test_stated_traffic_reads_negations(text: str, said: set[str]) -> None:
    assert stated_traffic(text) == said


def test_traffic_truth_rules() -> None:
    assert traffic_truth({"trafficinfo": {"evaluation": {"status": "3"}}}) == "congested"
    assert traffic_truth({"trafficinfo": {"description": "部分路段缓行", "evaluation": {}}}) == "slow"
    assert (
        traffic_truth({"trafficinfo": {"evaluation": {"expedite": "20%", "congested": "10%", "blocked": "70%"}}})
        == "congested"
    )
    assert traffic_truth("not parsed") is None and traffic_truth({"trafficinfo": {}}) is None
    assert stated_traffic("Traffic is free-flowing in both directions") == {"clear"}
    assert stated_traffic("Heavy traffic, jams near the bridge") == {"congested"}


ROUTE_COLS = [
    "query",
    "context",
    "task_scenario",
    "intent_family",
    "query_end_poi",
    "tool_list",
    "llm_ner_ans",
    "bus_lines_list",
    "matched_transit_index",
    "time",
    "duration",
]
BUS = "[{'name': 'bus_route', 'arguments': {'origin': '116.4,39.9', 'destination': '116.5,39.95'}}]"


def _route_csv(tmp_path: Path, rows: list[dict[str, str]]) -> Path:
    path = tmp_path / "route.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=ROUTE_COLS)
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    "context": "{'user_current_location': '116.4,39.9', 'city': '北京市', 'travel_tool': '公交'}",
                    "intent_family": "Preference-Constrained Route Planning",
                    "query_end_poi": "示例公园",
                    "tool_list": BUS,
                    **r,
                }
            )
    return path


def test_route_constrained_ie_truth_has_the_avoid_items(tmp_path: Path) -> None:
    row = {
        "query": "去示例公园，不要1号线，不要八通线",
        "task_scenario": "Route-Constrained Planning",
        "llm_ner_ans": "输出:不要1号线,不要八通线",
        "matched_transit_index": "1.0",
        "bus_lines_list": "[['地铁1号线(东站--西站)', '八通线'], ['地铁6号线', '公交12路']]",
    }
    (case,), _ = load_upstream(_route_csv(tmp_path, [row]))
    gold = case.truth.constraints or []
    assert sorted(g.slot for g in gold) == ["avoid", "avoid", "destination", "mode"]
    base = {"destination": "示例公园", "mode": "transit"}
    full = M.paper_extraction({**base, "avoid": ["地铁1号线(东站--西站)", "八通线"]}, gold)
    bare = M.paper_extraction({**base, "avoid": ["1号线", "八通线"]}, gold)
    assert full == bare == 1.0  # before issue 19 a correct extraction scored 0 ("nothing extra")
    assert M.paper_extraction(base, gold) == 0.0  # the avoid items are required
    assert M.paper_extraction({**base, "avoid": ["1号线"]}, gold) == 0.0


def test_arrival_departure_ie_truth_has_the_time(tmp_path: Path) -> None:
    row = {
        "query": "8点半要到示例公园，几点出发",
        "task_scenario": "Arrival/Departure Time Query",
        "time": "8点半",
        "duration": "37分钟",
    }
    (case,), _ = load_upstream(_route_csv(tmp_path, [row]))
    gold = case.truth.constraints or []
    assert [g.slot for g in gold if g.slot == "time"] == ["time"]
    base = {"destination": "示例公园", "mode": "transit"}
    assert M.paper_extraction({**base, "time": "08:30"}, gold) == 1.0
    assert M.paper_extraction({**base, "time": "8点半"}, gold) == 1.0
    assert M.paper_extraction(base, gold) == 0.0
    assert M.paper_extraction({**base, "time": "09:30"}, gold) == 0.0
