"""MobilityBench reference mode, one test per reproduced rule of the public evaluator (issue 19 item 3).

Each test states the value the reference computes for a hand-made case; rig's earlier value is in a comment."""

from __future__ import annotations

import json

import pytest

from rig.benchmarks.mobilitybench import scoring as M
from rig.benchmarks.mobilitybench.lexicon import LEXICONS
from rig.benchmarks.mobilitybench.scoring.reference import ref_answer, ref_efficiency, ref_route_index, ref_tools
from rig.benchmarks.mobilitybench.similarity import CharJaccard, EmbeddingBackend, reference_backend

ZH = LEXICONS["zh"]
Q = {"name": "query_poi", "arguments": {"keywords": "甲", "city": "北京市"}}
D = {
    "name": "driving_route",
    "arguments": {"origin": "116.1,39.9", "destination": "116.2,39.8", "waypoints": ["116.15,39.85"]},
}


def _multistop() -> M.Truth:
    return M.Truth(scenario="Multi-stop Planning", tool_list=[Q, Q, D], lang="zh")


def _call(tool: dict, step: int, worker: int) -> M.Call:
    return M.Call(name=tool["name"], arguments=tool["arguments"], task=step, worker=worker)


def _fence(**body: object) -> str:
    return "```json\n" + json.dumps(body, ensure_ascii=False) + "\n```"


def _pe(calls: list[M.Call], workers: list[int]) -> M.Prediction:
    return M.Prediction(
        intent="路线规划",
        steps=["查询坐标"],
        calls=calls,
        workers=workers,
        report=_fence(route_index="0", content="推荐路线全程12公里，耗时20分钟", route_info=""),
    )


def test_cumulative_capture_with_parallel_tasks_in_a_later_step() -> None:
    # plan [[q1], [q2, d]]: worker records q1 | q1 q2 | q1 d -> 5 rows, 3 useful: TS-R 0.6 (rig said 0.75)
    calls = [_call(Q, 0, 0), _call(Q, 1, 1), _call(D, 1, 2)]
    s = M.score(_pe(calls, [0, 1, 1]), _multistop(), "reference", CharJaccard(), cumulative=True)
    assert s["TS_R"] == pytest.approx(0.6)
    assert s["TS_P"] == 1.0


def test_cumulative_capture_counts_a_worker_that_made_no_call() -> None:
    # plan [[q1], [d]] where the second worker made no call: its record still lists q1 from its history.
    truth = M.Truth(scenario="Point-to-Point Planning", tool_list=[Q, D], lang="zh")
    s = M.score(_pe([_call(Q, 0, 0)], [0, 1]), truth, "reference", CharJaccard(), cumulative=True)
    assert s["TS_R"] == 0.5  # rig said 1.0
    # a first-step worker with no call has an empty history: no record, so nothing changes
    s = M.score(_pe([_call(Q, 0, 1)], [0, 0]), truth, "reference", CharJaccard(), cumulative=True)
    assert s["TS_R"] == 1.0


def test_null_route_index_falls_back_to_the_answer_text() -> None:
    answer = _fence(route_index=None, content="推荐方案2，全程约12公里", route_info="")
    assert ref_route_index(answer, ZH) == "1"  # rig read "" (no index)
    truth = M.Truth(scenario="Point-to-Point Planning", lang="zh")
    assert ref_answer(answer, truth, CharJaccard(), ZH) == (1.0, 1.0)
    assert ref_route_index(_fence(route_index="", content="x"), ZH) == ""  # an empty string is kept


def test_whitespace_only_content_delivers_nothing() -> None:
    # the reference returns "   " (truthy) as the content and then finds it empty; rig fell back to the whole text
    answer = _fence(route_index="", content="   ", route_info="北京今天晴，气温20度")
    truth = M.Truth(scenario="Weather Query", slots={"weather_description": "晴，气温20度"}, lang="zh")
    assert ref_answer(answer, truth, CharJaccard(), ZH) == (0.0, 0.0)


def test_nearby_case_without_ground_truth_scores_zero() -> None:
    answer = _fence(route_index="", content="附近有示例超市和示例餐厅", route_info="")
    truth = M.Truth(scenario="Nearby Query", slots={"near_poi_ans": None}, lang="zh")
    assert ref_answer(answer, truth, CharJaccard(), ZH) == (1.0, 0.0)  # rig said FPR 1.0
    empty = M.Truth(scenario="Nearby Query", slots={"near_poi_ans": {"data": {"pois": []}}}, lang="zh")
    assert ref_answer(answer, empty, CharJaccard(), ZH) == (1.0, 1.0)  # an empty POI list still scores 1


def test_route_constrained_without_any_index_scores_zero_without_raising() -> None:
    truth = M.Truth(scenario="Route-Constrained Planning", slots={"matched_transit_index": None}, lang="zh")
    answer = "路线：全程12公里，耗时40分钟"  # no fence, no route_index, no 方案N
    assert ref_answer(answer, truth, CharJaccard(), ZH) == (1.0, 0.0)  # rig raised (int(""))
    pred = M.Prediction(intent="路线规划", report=answer)
    assert M.score(pred, truth, "reference", CharJaccard())["FPR"] == 0.0
    with pytest.raises(ValueError):  # an index against no GT still raises there: the case drops
        ref_answer(_fence(route_index="1", content="方案"), truth, CharJaccard(), ZH)


def test_efficiency_splits_a_total_when_both_counts_are_zero() -> None:
    usage = {
        "Planner_prompt_tokens": 0,
        "Planner_completion_tokens": 0,
        "Planner_total_tokens": 101,
        "Worker_prompt_tokens": 10,
        "Worker_completion_tokens": 5,
        "Worker_total_tokens": 99,
    }
    assert ref_efficiency(usage) == (70 + 10, 31 + 5)  # rig ignored the Planner total (0, 0)
    assert ref_efficiency({"planner_prompt_tokens": 7}) == (0, 0)  # the key spellings are case-sensitive


def test_tool_scores_are_rounded_to_four_decimals() -> None:
    truth = M.Truth(
        scenario="Weather Query",
        lang="zh",
        tool_list=[
            Q,
            {"name": "weather_query", "arguments": {"city": "北京"}},
            {"name": "reverse_geocoding", "arguments": {}},
        ],
    )
    ts_p, ts_r, sc = ref_tools([("query_poi", {"keywords": "甲"}), ("query_poi", {}), ("query_poi", {})], truth)
    assert ts_p == 0.3333  # 1/3, rounded
    assert ts_r == 1 - 0.6667  # redundancy rounded before the subtraction, bit for bit
    assert sc == 1.0


def test_reference_similarity_is_the_jaccard_fallback_unless_a_model_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert reference_backend("minilm").name == "char-jaccard"
    assert reference_backend("jaccard-lower").name == "char-jaccard"
    assert reference_backend(None).name == "char-jaccard"
    assert isinstance(reference_backend(str(tmp_path)), EmbeddingBackend)
    # the reference's answer similarity does not strip: " 晴" vs "晴" is containment either way, but "" is 0
    weather = M.Truth(scenario="Weather Query", slots={"weather_description": "多云转晴，东风3级"}, lang="zh")
    answer = _fence(route_index="", content="今天多云转晴天，风力东风三级", route_info="")
    assert ref_answer(answer, weather, CharJaccard(), ZH)[1] == 0.0  # Jaccard 0.5 is not > 0.8


@pytest.mark.parametrize(
    "raw", ["1" * 5000, "[" * 2000 + "]" * 2000, '{"keywords": ' + "9" * 5000 + "}"], ids=["int", "deep", "in-object"]
)
def test_rescored_string_arguments_past_json_limits_are_unusable_not_a_crash(raw: str) -> None:
    # Upstream raw results carry arguments as text; Python's json.loads raises ValueError (not JSONDecodeError) on
    # an integer over 4,300 digits and RecursionError on deep nesting (issue 18 item 4).
    from rig.benchmarks.mobilitybench.scoring.records import call_args
    from rig.benchmarks.mobilitybench.tools import schema_valid

    assert call_args(raw) == {}
    assert schema_valid("query_poi", raw) is False


def test_sc_is_rounded_to_four_decimals() -> None:
    # three paired calls with c*f = 1, 1, 0 (the third has a key outside check_max): SC 2/3 -> 0.6667
    truth = M.Truth(scenario="POI Query", lang="zh", tool_list=[Q, Q, Q])
    calls = [
        ("query_poi", {"keywords": "甲"}),
        ("query_poi", {"keywords": "乙"}),
        ("query_poi", {"keywords": "丙", "x": 1}),
    ]
    assert ref_tools(calls, truth)[2] == 0.6667


def test_only_ground_truth_tool_names_are_renamed() -> None:
    # the reference maps the GT's traffic_status_road_api to traffic_status; a call named the GT's way is not renamed
    truth = M.Truth(
        scenario="Traffic Info Query",
        lang="zh",
        tool_list=[{"name": "traffic_status_road_api", "arguments": {"name": "示例大道", "city": "北京市"}}],
    )
    args = {"name": "示例大道", "city": "北京市"}
    assert ref_tools([("traffic_status", args)], truth) == (1.0, 1.0, 1.0)
    assert ref_tools([("traffic_status_road_api", args)], truth) == (0.0, 0.0, 0.0)  # rig said 1.0, 1.0, 1.0


def test_intent_similarity_does_not_strip() -> None:
    # label 路线规划; " 规划路线x": chars {space, 规, 划, 路, 线, x} vs the label's four -> 4/6 < 0.7 (stripped: 4/5)
    assert M.ref_intent(" 规划路线x", "Point-to-Point Planning", CharJaccard(), ZH) == 0.0
    assert M.ref_intent("规划路线x", "Point-to-Point Planning", CharJaccard(), ZH) == 1.0
    assert M.ref_intent("路线规划 ", "Point-to-Point Planning", CharJaccard(), ZH) == 1.0  # containment


def test_answer_rules_look_the_scenario_up_exactly() -> None:
    # the answer metric's scenario table is read with .get (no partial match): "Nearby" is the general type
    answer = "附近有示例超市和示例餐厅，步行约五分钟"
    near = {"near_poi_ans": {"data": {"pois": []}}}
    assert ref_answer(answer, M.Truth(scenario="Nearby Query", slots=near, lang="zh"), CharJaccard(), ZH) == (1.0, 1.0)
    assert ref_answer(answer, M.Truth(scenario="Nearby", slots=near, lang="zh"), CharJaccard(), ZH) == (1.0, 0.0)


def test_general_type_reads_the_route_index_from_the_content() -> None:
    # general type with a route answer: the route rule runs on the content, so the fence's empty index does not hide
    # the content's "方案1", while the whole answer's index ("") would give 0
    truth = M.Truth(scenario="Other Query", slots={"route_ans": {"route": {}}}, lang="zh")
    answer = _fence(route_index="", content="推荐方案1，全程约12公里", route_info="")
    assert ref_answer(answer, truth, CharJaccard(), ZH) == (1.0, 1.0)
