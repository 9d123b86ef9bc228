"""A turn at a run records which device its GPU readings are of, and says so where rig could not put the model
there (an attached server): the readings may then be another device's."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.execution import turn
from rig.execution.bench import BenchOptions, run_bench
from rig.names import escape
from rig.render.html import html_report
from rig.render.report import report_markdown
from rig.runfolder.manifest import RunManifest
from rig.telemetry.gpu import GpuMemorySummary, GpuSampler
from tests.execution.conftest import ATTACHED_MODELS


class WatchedGpu(GpuSampler):
    """NVML as it would answer for physical GPU 3 (no driver needed)."""

    def _open(self) -> None:
        self.summary = GpuMemorySummary(
            available=True, device_index=3, device_uuid="GPU-3f", device_name="Fake H200", total_bytes=1 << 30
        )

    def _read(self) -> int | None:
        return 1 << 20


def test_an_attached_server_run_names_the_device_it_watched(
    attached: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models.yaml").write_text(ATTACHED_MODELS.format(url=attached))
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(turn, "GpuSampler", WatchedGpu)
    said: list[str] = []
    opts = BenchOptions(
        model="attached", benchmark="callnavi", limit=1, gpu=0, models_file=tmp_path / "models.yaml",
        out=tmp_path / "runs", idle_window_s=0.0,
    )  # fmt: skip
    run_dir = run_bench(opts, on_event=said.append)
    gpu = RunManifest.read(run_dir).gpu_memory
    assert gpu is not None and gpu.available
    assert gpu.placement is not None and f"a server at {attached} that rig attached to" in gpu.placement
    watched = "GPU memory and energy read on GPU 3 (Fake H200, GPU-3f), which may not be the model's device"
    assert any(m.startswith("warning: --gpu 0: GPU memory and energy are read on GPU 3 (Fake H200") for m in said)
    assert f"- {watched}: {gpu.placement}" in report_markdown(run_dir)
    page = html_report([run_dir])
    assert "GPU readings" in page and escape(f"read on {gpu.watched()}, which may not be the model") in page
