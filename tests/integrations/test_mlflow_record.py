"""What a run sends to MLflow, computed from the run folder alone (no server)."""

from __future__ import annotations

from pathlib import Path

from rig.integrations.mlflow_record import summary_metrics
from rig.runfolder.folder import RunFolder


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
