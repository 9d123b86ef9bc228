"""RouteEval metric, call checks and report tables on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from rig.benchmarks.routeeval.scoring import accuracy, check_call, deviation, is_mismatch, normalise_route_type
from rig.benchmarks.routeeval.tables import category_table, routeeval_tables, summary
from rig.records import EpisodeResult


def test_paper_example_5_mile_target() -> None:
    # Paper sec. 3.6: a 5-mile request answered with a 6-mile or a 4-mile route scores 0.80 either way.
    assert accuracy(6.0, 5.0) == pytest.approx(0.80)
    assert accuracy(4.0, 5.0) == pytest.approx(0.80)


@pytest.mark.parametrize(
    ("actual", "target", "expected"),
    [
        (5.0, 5.0, 1.0),  # exact
        (3.0, 2.0, 0.5),  # 50% over
        (1.0, 2.0, 0.5),  # 50% under
        (10.0, 5.0, 0.0),  # 100% over: clipped at 0
        (17.0, 5.0, 0.0),  # far over: still 0, never negative
        (0.0, 5.0, 0.0),  # nothing walked
        (6.2, 6.2, 1.0),
        (13.1 * 1.1, 13.1, 0.9),
    ],
)
def test_accuracy_hand_cases(actual: float, target: float, expected: float) -> None:
    assert accuracy(actual, target) == pytest.approx(expected)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_accuracy_refuses_bad_targets(bad: float) -> None:
    with pytest.raises(ValueError):
        accuracy(1.0, bad)


def test_mismatch_is_strictly_more_than_half() -> None:
    assert deviation(7.5, 5.0) == pytest.approx(0.5)
    assert not is_mismatch(7.5, 5.0)  # exactly 50% off: within the bound
    assert is_mismatch(7.51, 5.0)
    assert is_mismatch(2.49, 5.0)
    assert not is_mismatch(2.5, 5.0)


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("loop", "loop"),
        ("Loop", "loop"),
        (" out and back ", "out-and-back"),
        ("point_to_point", "point-to-point"),
        ("Out-And-Back", "out-and-back"),
        ("circuit", None),
        ("", None),
        (3, None),
        (None, None),
    ],
)
def test_route_type_normalisation(raw: object, norm: str | None) -> None:
    assert normalise_route_type(raw) == norm


def _args(**kw: object) -> dict:
    base = {
        "estimated_distance": 3,
        "route_type": "loop",
        "waypoints": [{"address": "Ateneum", "description": "start"}, {"address": "Kiasma", "description": ""}],
    }
    base.update(kw)
    return base


def test_check_call_accepts_and_cleans() -> None:
    cat, why, clean = check_call(_args(route_type="Out and back", extra="ignored"), 12, 120)
    assert cat is None and why is None
    assert clean == {"estimated_distance": 3.0, "route_type": "out-and-back", "addresses": ["Ateneum", "Kiasma"]}
    # a missing description is tolerated: the tool reads addresses only
    assert check_call(_args(waypoints=[{"address": "A"}, {"address": "B"}]), 12, 120)[0] is None


@pytest.mark.parametrize(
    ("args", "category"),
    [
        ("not a dict", "tool_calling_failure"),
        ({"route_type": "loop", "waypoints": []}, "tool_calling_failure"),  # no estimated_distance
        (_args(estimated_distance="3"), "tool_calling_failure"),  # a string is not a number
        (_args(estimated_distance=True), "tool_calling_failure"),
        (_args(route_type="figure eight"), "invalid_route_type"),
        (_args(route_type=None), "invalid_route_type"),
        (_args(waypoints="Ateneum"), "tool_calling_failure"),
        (_args(waypoints=[{"address": "Ateneum", "description": ""}]), "tool_calling_failure"),  # one waypoint
        (_args(waypoints=[{"address": f"P{i}", "description": ""} for i in range(13)]), "tool_calling_failure"),
        (
            _args(waypoints=[{"address": " ", "description": ""}, {"address": "B", "description": ""}]),
            "tool_calling_failure",
        ),
        (
            _args(waypoints=[{"address": "x" * 121, "description": ""}, {"address": "B", "description": ""}]),
            "tool_calling_failure",
        ),
    ],
)
def test_check_call_classifies(args: object, category: str) -> None:
    cat, why, _ = check_call(args, 12, 120)
    assert cat == category and why


def _r(
    pid: str,
    acc: float,
    success: bool,
    err: str | None,
    d: float | None = None,
    wp: int | None = None,
    repeat: int = 0,
    **tags: str,
) -> EpisodeResult:
    return EpisodeResult(
        benchmark="routeeval",
        episode_id=pid,
        repeat=repeat,
        error_category=err,
        tags={
            "category": "simple",
            "region": "US",
            "length": "short",
            "route_type": "loop",
            "tool_mode": "json",
            **tags,
        },
        scores={
            "accuracy": acc,
            "success": float(success),
            "d_target_mi": 5.0,
            "d_actual_mi": d,
            "n_waypoints": None if wp is None else float(wp),
        },
    )


def _runs() -> list[EpisodeResult]:
    return [
        _r("a", 1.0, True, None, d=5.0, wp=4),  # perfect
        _r("a", 0.96, True, None, d=4.8, wp=6, repeat=1),  # perfect (>= 0.95)
        _r("b", 0.8, True, None, d=6.0, wp=5, category="complex", region="international", length="long"),  # high
        _r(
            "b",
            0.3,
            False,
            "distance_mismatch",
            d=8.5,
            wp=3,
            repeat=1,
            category="complex",
            region="international",
            length="long",
        ),
        _r("c", 0.0, False, "invalid_waypoint", wp=2, category="moderate", region="generic", length="other"),
        _r("c", 0.0, False, "tool_calling_failure", repeat=1, category="moderate", region="generic", length="other"),
    ]


def test_summary_numbers_by_hand() -> None:
    s = summary(_runs())
    assert s["runs"] == 6 and s["successes"] == 3
    assert s["success_rate"] == pytest.approx(0.5)
    assert s["accuracy"] == pytest.approx((1.0 + 0.96 + 0.8 + 0.3) / 6)
    assert s["accuracy_measured"] == pytest.approx((1.0 + 0.96 + 0.8 + 0.3) / 4)
    assert (s["perfect"], s["high"]) == (2, 3)
    assert s["perfect_of_successes"] == pytest.approx(2 / 3)
    accs = [1.0, 0.96, 0.8, 0.3, 0.0, 0.0]
    m = sum(accs) / 6
    assert s["std"] == pytest.approx(math.sqrt(sum((a - m) ** 2 for a in accs) / 6))
    assert s["avg_waypoints"] == pytest.approx((4 + 6 + 5 + 3 + 2) / 5)
    assert s["avg_distance_mi"] == pytest.approx((5.0 + 4.8 + 6.0 + 8.5) / 4)
    assert dict(s["errors"]) == {"distance_mismatch": 1, "invalid_waypoint": 1, "tool_calling_failure": 1}


def test_tables_reproduce_the_paper_layouts() -> None:
    tables = routeeval_tables(_runs(), "m", {"short": (2.0, 4.0), "long": (8.0, 13.1)}, 50, "us50")
    by = {t.title.split("(layout of ")[-1].rstrip(")"): t for t in tables}
    t1 = by["the paper's Table 1"]
    assert t1.columns[:4] == ["Model", "Success", "Accuracy", "Perfect"]
    assert t1.rows[0][:2] == ["m", "50.0%"] and t1.rows[0][3] == "66.7%"
    assert "3 prompt(s) of 50 in pack 'us50' x 2 repeat(s) = 6 run(s)" in t1.note
    assert by["Table 2"].rows == [["m", 2, 3, pytest.approx(summary(_runs())["std"])]]
    assert by["Table 3"].rows == [[1, "m", "50.0%", "3/6"]]
    t5 = by["Table 5"]
    assert [r[0] for r in t5.rows] == [
        "Invalid waypoints",
        "Distance mismatch >50%",
        "Tool calling failure",
        "API timeout",
        "Invalid route type",
        "Other errors",
    ]
    assert [r[1] for r in t5.rows] == [1, 1, 1, 0, 0, 0]
    assert t5.rows[0][2] == "16.7%"
    assert by["Table 6"].rows == [["m", 1, 1, 1, 0, 0, 0]]


def test_category_table_rows_and_missing_groups() -> None:
    t = category_table(_runs(), {"short": (2.0, 4.0), "long": (8.0, 13.1)})
    rows = {r[0]: r for r in t.rows}
    assert rows["Simple (distance + location)"][1:] == [pytest.approx(0.98), "100.0%", 2]
    assert rows["Complex (multiple constraints)"][1:] == [pytest.approx(0.55), "50.0%", 2]
    assert rows["Moderate (terrain/route type)"][1:] == [0.0, "0.0%", 2]
    assert rows["Short routes (2-4 miles)"][3] == 2 and rows["Long routes (8-13.1 miles)"][3] == 2
    # no run of a kind: None (printed as a dash), never 0
    empty = category_table([], None)
    assert all(r[1] is None and r[2] is None and r[3] == 0 for r in empty.rows)
