import csv
import json
from pathlib import Path

from rig.runs.export import export, list_runs

from .test_report import make_run


def test_runs_and_exports(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    rows = list_runs(tmp_path)
    assert len(rows) == 1 and rows[0].done == rows[0].total == 32 and rows[0].status == "finished"
    j = [json.loads(line) for line in export(run_dir, "jsonl").read_text().splitlines()]
    assert len(j) == 32 and {"score_ast", "tag_difficulty", "e2e_s", "prompt_tokens"} <= set().union(*j)
    assert all(r["decode_tps"] is None for r in j)  # fake engine measured none: stays empty, not 0
    with export(run_dir, "csv").open() as f:
        c = list(csv.DictReader(f))
    assert len(c) == 32 and c[0]["model"] == "gemma3-270m"


def test_parquet_when_pyarrow_present(tmp_path: Path) -> None:
    import pytest

    pq = pytest.importorskip("pyarrow.parquet")
    p = export(make_run(tmp_path), "parquet")
    assert pq.read_table(p).num_rows == 32
