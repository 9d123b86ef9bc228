"""scripts/bench_vllm.py writes one results file for two targets measured in separate runs (``--only``): a run
replaces only the section it measured."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script


def test_a_run_replaces_only_its_section(tmp_path: Path) -> None:
    out = tmp_path / "vllm_cpu.md"
    out.write_text(
        "# old head\n\nprose\n\n## Agents: 8 MobilityBench episodes, old\n\nold agents\n\n## Throughput: old\n\n"
        "old tps\n\n## GPU\n\nnotes\n"
    )
    script = load_script("bench_vllm")
    new = ["## Agents: 8 MobilityBench episodes, new", "", "new agents"]
    merged = script._merge(out, {"## Agents MobilityBench": new})
    assert list(merged) == ["## Throughput", "## Agents MobilityBench", "## GPU"]
    assert merged["## Agents MobilityBench"] == new
    assert merged["## Throughput"] == ["## Throughput: old", "", "old tps", ""]
    assert merged["## GPU"] == ["## GPU", "", "notes"]
    # An EVGeoQA agents run adds its own section and keeps MobilityBench's.
    out.write_text("\n".join(line for sec in merged.values() for line in sec))
    ev = ["## Agents: 8 EVGeoQA episodes, new", "", "ev agents"]
    merged = script._merge(out, {"## Agents EVGeoQA": ev})
    assert list(merged) == ["## Throughput", "## Agents MobilityBench", "## Agents EVGeoQA", "## GPU"]
    assert merged["## Agents MobilityBench"][:3] == new and merged["## Agents EVGeoQA"] == ev
    # A run with another KV block size is a measurement of its own, beside the default one.
    out.write_text("\n".join(line for sec in merged.values() for line in sec))
    b32 = ["## Agents: 8 EVGeoQA episodes, new, KV block size 32", "", "b32"]
    merged = script._merge(out, {script._section_key(b32[0]): b32})
    assert list(merged) == [
        "## Throughput",
        "## Agents MobilityBench",
        "## Agents EVGeoQA",
        "## Agents EVGeoQA block 32",
        "## GPU",
    ]
    assert merged["## Agents EVGeoQA"][:3] == ev and merged["## Agents EVGeoQA block 32"] == b32


def test_a_new_file_gets_the_measured_section(tmp_path: Path) -> None:
    merged = load_script("bench_vllm")._merge(tmp_path / "none.md", {"## Throughput": ["## Throughput: x"]})
    assert merged == {"## Throughput": ["## Throughput: x"]}
