"""CallNavi through the real runner with the embedded model: constrained answers always parse and validate."""

from pathlib import Path

import pytest

from rig.benchmarks.callnavi.benchmark import CallNavi
from rig.benchmarks.callnavi.prompts import answer_schema
from rig.decoding import parse_output, validate
from rig.execution.bench import BenchOptions, run_bench
from rig.runfolder.store import Store

pytestmark = pytest.mark.model


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_constrained_answers_parse_and_validate(tmp_path: Path, fmt: str, embedded_weights: str) -> None:
    run_dir = run_bench(
        BenchOptions(
            model="gemma3-270m",
            benchmark="callnavi",
            limit=3,
            decode=fmt,
            options={"format": fmt, "task": "params"},
            out=tmp_path,
        )
    )
    store = Store(run_dir / "results.sqlite")
    results = store.results()
    store.close()
    bench = CallNavi(None, {"format": fmt})
    apis = bench.domains()["maps"].apis
    assert len(results) == 3
    for r in results:
        g = r.generations[0]
        assert g.error is None and g.finish_reason == "stop", (g.finish_reason, g.text[-200:])
        assert r.scores["syntax"] == 1.0, (r.error, g.text)
        from rig.decoding.constraint import Constraint

        kind = "json_schema" if fmt == "json" else "yaml_schema"
        value, err = parse_output(g.text, Constraint(kind=kind, schema_=answer_schema(apis, "params")))
        assert err is None and not validate(value, answer_schema(apis, "params"))
