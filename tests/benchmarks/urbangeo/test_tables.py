"""UrbanGeoEval report fidelity (issue 19): the paper's macro Overall, the judge named in every R/Total table, and
program-vs-judge agreement, on hand-built results."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rig.benchmarks.urbangeo.benchmark import UrbanGeoEval
from rig.benchmarks.urbangeo.tables import agreement_table, judged_by, macro_overall, table4, urbangeo_tables
from rig.records import EpisodeResult


def _k(dim: str, correct: bool, i: int) -> EpisodeResult:
    return EpisodeResult(
        benchmark="urbangeo",
        episode_id=f"k{dim}{i}",
        repeat=0,
        tags={"module": "knowledge", "dimension": dim, "city": "Helsinki"},
        scores={"correct": float(correct), "parsed": 1.0},
    )


def _r(
    task: str,
    program: float | None,
    judge: float | None,
    i: int = 0,
    judge_name: str = "cand",
    self_tag: str | None = "yes",
) -> EpisodeResult:
    tags = {"module": "reasoning", "task": task, "city": "Helsinki", "judge": judge_name, "judge_temperature": "0.6"}
    if self_tag is not None:
        tags["judge_self"] = self_tag
    answer = program if task in ("DS", "DR", "RE", "PN", "PR") else judge
    return EpisodeResult(
        benchmark="urbangeo",
        episode_id=f"r{task}{i}",
        repeat=0,
        tags=tags,
        scores={
            "reason": 10.0,
            "answer": answer,
            "answer_program": program,
            "answer_judge": judge,
            "points_max": 25.0,
            "total_pct": None if answer is None else (10 + answer) * 4,
        },
    )


@pytest.mark.parametrize(
    ("cells", "overall"),
    [  # the paper's Table 4 rows whose printed Overall is their cells' mean (GPT-4o's prints 54.49 for a mean of 53.49)
        ([31.43, 58.43, 39.98, 77.42, 49.02, 24.05], 46.72),  # Llama-3.1-70B-Instruct
        ([22.22, 44.19, 28.13, 66.95, 27.47, 18.44], 34.57),  # Llama-3.1-8B-Instruct
        ([31.40, 62.16, 39.80, 79.17, 54.56, 26.33], 48.90),  # Qwen2.5-72B-Instruct
        ([24.34, 48.10, 29.37, 76.88, 50.74, 25.94], 42.56),  # Qwen2.5-7B-Instruct
    ],
)
def test_papers_table4_rows(cells: list[float], overall: float) -> None:
    assert macro_overall(cells) == overall


def test_overall_is_the_papers_macro_average() -> None:
    # 1 of 1 Node right, 1 of 3 Area right, the other dimensions 0 of 1: macro (100 + 33.33) / 6, micro 2 / 8
    res = [_k("Node", True, 0)] + [_k("Area", i == 0, i) for i in range(3)]
    res += [_k(d, False, 0) for d in ("Road", "Type", "Function", "Surroundings")]
    t = table4(res, "m")
    assert t.columns[-2:] == ["Overall", "Overall (micro)"]
    assert t.rows[0][-2] == pytest.approx(round((100 + 100 / 3) / 6, 2))
    assert t.rows[0][-1] == 25.0
    assert "mean of the 6 dimension accuracies" in (t.note or "")
    partial = table4(res[:4], "m")  # Node and Area only: said to be incomparable with the paper's
    assert partial.rows[0][-2] == pytest.approx(round((100 + 100 / 3) / 2, 2)) and "not comparable" in partial.note


def test_every_r_or_total_table_names_the_judge_and_self_judging() -> None:
    res = [_k("Node", True, 0), _r("DS", 10.0, 10.0), _r("RE", 10.0, 0.0, judge_name="cand")]
    tables = urbangeo_tables(res, "cand", UrbanGeoEval.Options())
    with_r = [t for t in tables if any(c.endswith(" R") or c == "R" or "total" in c.lower() for c in t.columns)]
    assert len(with_r) >= 4  # Table 5, judge verdicts, relation subtypes, per city
    for t in with_r:
        assert "judge: cand, self-judged" in t.title, t.title
    ext = [_r("DS", 10.0, 10.0, judge_name="big-judge", self_tag="no")]
    t5 = next(t for t in urbangeo_tables(ext, "cand", UrbanGeoEval.Options(judge="big-judge")) if "Table 5" in t.title)
    assert "judge: big-judge" in t5.title and "self-judged" not in t5.title
    # results stored before the judge_self tag: the recorded options decide
    old = [_r("DS", 10.0, 10.0, self_tag=None)]
    assert judged_by(old, UrbanGeoEval.Options()) == "judge: cand, self-judged"
    assert judged_by(old, UrbanGeoEval.Options(judge="cand")) == "judge: cand"


def test_program_vs_judge_agreement() -> None:
    res = [
        _r("DS", 10.0, 10.0, 0),
        _r("DS", 10.0, 4.0, 1),
        _r("DS", 0.0, 0.5, 2),
        _r("DS", 6.0, None, 3),
        _r("NV", None, 7.0),
    ]
    t = agreement_table(res, "judge: j")
    assert t is not None and [r[0] for r in t.rows] == ["DS"]  # NV has no program score; unparsed verdicts left out
    _, pairs, prog, judge, bias, mad, within1, side = t.rows[0]
    assert pairs == 3 and prog == pytest.approx(6.67) and judge == pytest.approx(4.83)
    assert bias == pytest.approx(round((0 - 6 + 0.5) / 3, 2)) and mad == pytest.approx(round(6.5 / 3, 2))
    assert within1 == pytest.approx(66.67) and side == pytest.approx(66.67)
    assert agreement_table([_r("NV", None, 7.0)], "x") is None


def test_the_html_report_of_a_self_judged_run_says_so(tmp_path: Path) -> None:
    """The report-stability fixture's UrbanGeoEval part was judged by the candidate (Gemma 270M) itself."""
    from rig.render.html import html_report
    from rig.render.report import report_markdown

    fixture = Path(__file__).parents[2] / "fixtures" / "run_before_issue17"
    run = tmp_path / fixture.name
    shutil.copytree(fixture, run)
    md = report_markdown(run)
    html = html_report([run])
    assert "Table 5; judge: gemma3-270m, self-judged)" in md
    assert "self-judged" in html
