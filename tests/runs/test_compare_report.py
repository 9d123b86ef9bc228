"""compare_report over runs made with a fake engine (the end-to-end compare test is in test_compare.py)."""

from pathlib import Path

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.runs.compare import compare_report
from tests.fakes import FakeEngine
from tests.runs.test_report import make_run
from tests.runs.test_runner import oracle


def test_variants_table_has_the_share_of_cut_replies(tmp_path: Path) -> None:
    right = oracle(CallNavi())
    n = {"i": 0}

    def half_cut(req):  # type: ignore[no-untyped-def]
        n["i"] += 1
        text = right(req)
        return text[: len(text) // 2] if n["i"] % 2 else text

    for d in "abc":
        (tmp_path / d).mkdir()
    finish = lambda text: "stop" if text.endswith(("]", "}")) else "length"  # noqa: E731
    full = make_run(tmp_path / "a", n_eps=8, engine=FakeEngine(right, finish=finish))
    cut = make_run(tmp_path / "b", n_eps=8, engine=FakeEngine(half_cut, finish=finish))
    silent = make_run(tmp_path / "c", n_eps=8)  # no finish reasons at all
    md, _ = compare_report([full, cut, silent])
    lines = md.splitlines()
    col = next(x for x in lines if x.startswith("| Model | Quant")).split(" | ").index("Cut at max_tokens")
    rows = [x for x in lines if x.startswith("| gemma3-270m |")][:3]  # the Variants table comes first
    assert [r.split(" | ")[col] for r in rows] == ["0.000", "0.500", "not measured"]
