"""scripts/bench_vllm.py writes one results file for two targets measured in separate runs (``--only``): a run
replaces only the section it measured."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_vllm", ROOT / "scripts" / "bench_vllm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_run_replaces_only_its_section(tmp_path: Path) -> None:
    out = tmp_path / "vllm_cpu.md"
    out.write_text(
        "# old head\n\nprose\n\n## Agents: old\n\nold agents\n\n## Throughput: old\n\nold tps\n\n## GPU\n\nnotes\n"
    )
    merged = _script()._merge(out, {"## Agents": ["## Agents: new", "", "new agents"]})
    assert list(merged) == ["## Throughput", "## Agents", "## GPU"]
    assert merged["## Agents"] == ["## Agents: new", "", "new agents"]
    assert merged["## Throughput"] == ["## Throughput: old", "", "old tps", ""]
    assert merged["## GPU"] == ["## GPU", "", "notes"]


def test_a_new_file_gets_the_measured_section(tmp_path: Path) -> None:
    merged = _script()._merge(tmp_path / "none.md", {"## Throughput": ["## Throughput: x"]})
    assert merged == {"## Throughput": ["## Throughput: x"]}
