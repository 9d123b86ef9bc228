"""What a run sends MLflow is the same from the same folder on every export, whatever rig exports it."""

from __future__ import annotations

import json
from pathlib import Path

from rig.integrations.mlflow_record import run_params
from rig.runfolder.folder import RunFolder

OLD_RUN = Path(__file__).parents[1] / "fixtures" / "run_before_min_p"


def test_a_run_from_before_a_sampling_field_sends_the_sampling_it_sent_then() -> None:
    """MLflow refuses a changed param: a field Sampling gained since (min_p, unset) must not appear in the export of
    a run an earlier rig exported."""
    recorded = json.loads((OLD_RUN / "manifest.json").read_text())["config"]["model"]["sampling"]
    sent = run_params(RunFolder(OLD_RUN))["model.sampling"]
    assert json.loads(sent) == recorded
