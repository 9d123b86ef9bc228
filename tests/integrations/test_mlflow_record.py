"""What a run sends to MLflow, computed from the run folder alone (no server): the same from the same folder on every
export, whatever rig exports it."""

from __future__ import annotations

import json
from pathlib import Path

from rig.integrations.mlflow_record import run_params, summary_metrics
from rig.runfolder.folder import RunFolder

OLD_RUN = Path(__file__).parents[1] / "fixtures" / "run_before_min_p"


def test_pass_k_and_the_failure_classes_are_metrics(tmp_path: Path) -> None:
    """Without a server: a run with repeats sends pass^k and pass@k per k with their CIs, and episodes per class."""
    from tests.render.test_export import make_repeat_run

    folder = RunFolder(make_repeat_run(tmp_path, repeats=3, temperature=0.7))
    s = folder.summary("callnavi")
    metrics, reasons = summary_metrics("callnavi", s)
    assert s.reliability is not None and s.failures is not None
    for p in s.reliability.rows:
        assert metrics[f"callnavi/pass_hat_{p.k}"] == p.pass_hat and metrics[f"callnavi/pass_at_{p.k}"] == p.pass_at
        assert metrics[f"callnavi/pass_hat_{p.k}_ci_low"] == p.pass_hat_low
    assert {f"callnavi/pass_hat_{k}" for k in (1, 3)} <= set(metrics) and not reasons.keys() & metrics.keys()
    assert {k: v for k, v in metrics.items() if "/failures_" in k} == {
        f"callnavi/failures_{c}": n for c, n in s.failures.classes().items()
    }


def test_a_run_from_before_a_sampling_field_sends_the_sampling_it_sent_then() -> None:
    """MLflow refuses a changed param: a field Sampling gained since (min_p, unset) must not appear in the export of
    a run an earlier rig exported."""
    recorded = json.loads((OLD_RUN / "manifest.json").read_text())["config"]["model"]["sampling"]
    sent = run_params(RunFolder(OLD_RUN))["model.sampling"]
    assert json.loads(sent) == recorded
