"""The sweep file's cells: the same decode -> tool mode rule as every other command, settings derived from RunSpec."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.analyses.compare import Variant, cell_spec
from rig.analyses.load.run import level_argv
from rig.execution.bench import BenchOptions, bench_options
from rig.runfolder.spec import DECODES, read_spec
from rig.sweep.spec import load_sweep

MODELS = """models:
  fake-a: {engine: llamacpp, weights: {file: fake.gguf}, quantization: q4_k_m, context_length: 4096}
"""


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    (tmp_path / "fake.gguf").write_bytes(b"GGUF")
    (tmp_path / "models.yaml").write_text(MODELS)
    return tmp_path


def _sweep(d: Path, text: str) -> Path:
    f = d / "sweep.yaml"
    f.write_text("models: [fake-a]\nbenchmarks: [{name: callnavi, options: {task: routing}}]\n" + text)
    return f


@pytest.mark.parametrize("decode", DECODES)
def test_every_command_maps_decode_to_the_same_tool_mode(sweep_dir: Path, decode: str) -> None:
    """A sweep cell with decode json once ran tool mode prompt while `rig bench --decode json` ran json."""
    bench = bench_options({"model": "fake-a", "decode": decode}).tool_mode
    (cell,) = load_sweep(_sweep(sweep_dir, f"decode: [{decode}]\nmodels_file: models.yaml\n"))[1]
    compare = cell_spec(Variant(model="fake-a", decode=decode), BenchOptions(decode="none")).tool_mode
    argv = level_argv(sweep_dir / "load", 1, bench_options({"model": "fake-a", "decode": decode}), None)
    load = read_spec(Path(argv[argv.index("--spec") + 1])).tool_mode
    assert {"sweep": cell.tool_mode, "compare": compare, "load": load} == dict.fromkeys(
        ("sweep", "compare", "load"), bench
    )
    assert cell.spec().tool_mode == bench  # and what the cell's process is handed


def test_a_tool_mode_the_sweep_file_gives_is_kept(sweep_dir: Path) -> None:
    cells = load_sweep(_sweep(sweep_dir, "decode: [none, json]\ntool_mode: [prompt]\nmodels_file: models.yaml\n"))[1]
    assert [(c.decode, c.tool_mode) for c in cells] == [("none", "prompt"), ("json", "prompt")]


def test_a_setting_added_after_cell_keys_existed_enters_the_key_only_when_set(sweep_dir: Path) -> None:
    """order is a RunSpec setting a sweep file can give since its settings are RunSpec's: at its default the cell
    keeps the key earlier rigs gave it, set otherwise it is another cell, and its process is handed it."""
    (plain,) = load_sweep(_sweep(sweep_dir, "models_file: models.yaml\n"))[1]
    (grouped,) = load_sweep(_sweep(sweep_dir, "order: grouped\nmodels_file: models.yaml\n"))[1]
    (shuffled,) = load_sweep(_sweep(sweep_dir, "order: shuffled\nmodels_file: models.yaml\n"))[1]
    assert plain.key == grouped.key != shuffled.key
    assert shuffled.spec().order == "shuffled" and "order" not in plain.spec().spec_fields()


@pytest.mark.parametrize(("text", "where"), [("order: [shuffled]\n", "order"), ("shard: 0/2\n", "shard")])
def test_a_sweep_file_cannot_give_a_list_of_a_plain_setting_or_a_jobs_own(
    sweep_dir: Path, text: str, where: str
) -> None:
    from rig.sweep.spec import SweepError

    with pytest.raises(SweepError, match=f"sweep.yaml: {where}: "):
        load_sweep(_sweep(sweep_dir, text + "models_file: models.yaml\n"))


def test_a_cell_an_earlier_rig_ran_under_tool_mode_prompt_is_pointed_out(sweep_dir: Path) -> None:
    from rig.sweep.run import _earlier_cells

    (cell,) = load_sweep(_sweep(sweep_dir, "decode: [json]\nmodels_file: models.yaml\n"))[1]
    out = sweep_dir / "out"
    said: list[str] = []
    _earlier_cells(out, [cell], said.append)
    assert said == []
    (out / "cells" / cell.model_copy(update={"tool_mode": "prompt"}).key).mkdir(parents=True)
    _earlier_cells(out, [cell], said.append)
    assert len(said) == 1 and "tool_mode: [prompt]" in said[0]
