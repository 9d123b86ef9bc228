"""compare_report over runs made with a fake engine (the end-to-end compare test is in test_compare.py)."""

from pathlib import Path

from rig.runs.compare import compare_report
from tests.runs.test_report import cutting_engine, make_run


def test_variants_table_has_the_share_of_cut_replies(tmp_path: Path) -> None:
    full = make_run(tmp_path / "a", n_eps=8, engine=cutting_engine(0))
    cut = make_run(tmp_path / "b", n_eps=8, engine=cutting_engine(2))
    silent = make_run(tmp_path / "c", n_eps=8)  # no finish reasons at all
    md, _ = compare_report([full, cut, silent])
    lines = md.splitlines()
    col = next(x for x in lines if x.startswith("| Model | Quant")).split(" | ").index("Cut at max_tokens")
    rows = [x for x in lines if x.startswith("| gemma3-270m |")][:3]  # the Variants table comes first
    assert [r.split(" | ")[col] for r in rows] == ["0.000", "0.500", "not measured"]
