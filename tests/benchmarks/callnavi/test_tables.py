import pytest

from rig.benchmarks.callnavi.tables import callnavi_tables
from rig.records import EpisodeResult


def _res(qid: str, diff: str, task: str, score: float, rep: int = 0, text: str = "x") -> EpisodeResult:
    from rig.records import Generation

    key = "routing" if task == "routing" else "ast"
    scores = {key: score} if task == "routing" else {"syntax": 1.0, "structure": score, "ast": score, "order": score}
    return EpisodeResult(
        benchmark="callnavi",
        episode_id=f"{qid}/{task}",
        repeat=rep,
        tags={"difficulty": diff, "task": task, "question": qid, "domain": "bank"},
        scores=scores,
        generations=[Generation(request_hash="h", text=text)],
    )


def test_table4_per_difficulty_all_avg_and_macro() -> None:
    rs = [
        _res("e1", "easy", "params", 1),
        _res("e2", "easy", "params", 1),
        _res("e3", "easy", "params", 0),
        _res("m1", "medium", "params", 1),
        _res("m2", "medium", "params", 0),
        _res("h1", "hard", "params", 0),
        _res("e1", "easy", "routing", 1),
    ]
    row = callnavi_tables(rs, "m")[0].rows[0]
    cols = callnavi_tables(rs, "m")[0].columns
    got = dict(zip(cols, row, strict=True))
    assert got["AST Easy"] == pytest.approx(2 / 3) and got["AST Medium"] == 0.5 and got["AST Hard"] == 0.0
    assert got["AST All Avg"] == pytest.approx(3 / 6)
    assert got["AST Macro Avg"] == pytest.approx((2 / 3 + 0.5 + 0) / 3)
    assert got["Routing Easy"] == 1.0 and got["Routing Medium"] is None  # not run -> blank, not 0


def test_paper_denominators_option() -> None:
    rs = [_res(f"e{i}", "easy", "params", 1) for i in range(300)]
    row = callnavi_tables(rs, "m", paper_denominators=True)[0].rows[0]
    cols = callnavi_tables(rs, "m", paper_denominators=True)[0].columns
    got = dict(zip(cols, row, strict=True))
    assert got["AST Easy"] == pytest.approx(300 / 456) and got["AST All Avg"] == pytest.approx(300 / 729)


def test_stability_table_with_repeats() -> None:
    rs = [_res("q1", "easy", "params", 1, rep=i, text=t) for i, t in enumerate(["A", "A", "B", "C", "D"])]
    t = next(t for t in callnavi_tables(rs, "m") if "stability" in t.title)
    assert t.rows[0][3] == pytest.approx(0.25)  # AABCD


def test_ci_table_brackets_the_rate() -> None:
    rs = [_res(f"e{i}", "easy", "params", float(i % 2)) for i in range(40)]
    t = next(t for t in callnavi_tables(rs, "m") if "confidence" in t.title)
    ast = next(r for r in t.rows if r[1] == "AST All Avg")
    assert ast[3] == 0.5 and ast[4] < 0.5 < ast[5] and ast[2] == 40
