"""The run flags of `rig bench`, `rig compare` and `rig load` are derived from RunSpec: one declaration of each
setting's flag name, default, help text and bounds."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rig.cli import app
from rig.runfolder.spec import FLAGS, RunSpec

REPO = Path(__file__).resolve().parents[2]


def _params(command: str) -> dict[str, object]:
    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return {p.opts[0]: p for p in cmd.params if p.opts and p.opts[0].startswith("--")}


@pytest.mark.parametrize("command", ["bench", "compare", "load"])
def test_run_flags_take_name_help_and_default_from_the_spec(command: str) -> None:
    params = _params(command)
    own_help = {"bench": {"model"}, "compare": {"benchmark", "decode", "tool_mode", "seed"}}
    own_help["load"] = {"benchmark", "seed"}
    checked = 0
    for field, info in RunSpec.model_fields.items():
        p = params.get(FLAGS[field])
        if p is None or (command == "load" and field in ("model", "concurrency")):  # load's own: levels, a batcher
            continue
        checked += 1
        if field not in own_help[command]:
            assert p.help == info.description, (command, field)  # type: ignore[attr-defined]
        if field not in ("options", "tool_mode", "benchmark", "seed", "model"):  # a list flag; derived; per command
            assert p.default == info.default, (command, field)  # type: ignore[attr-defined]
    assert checked >= 10


@pytest.mark.parametrize("command", ["load", "compare"])
def test_the_spec_bounds_every_command_alike(command: str, tmp_path: Path) -> None:
    """`--repeats 0` is refused by the RunSpec's bound, in the same words from each command (load once had bounds
    of its own in typer, compare none)."""
    args = [command, *(["gemma3-270m"] if command == "compare" else []), "--repeats", "0"]
    r = CliRunner().invoke(app, [*args, "--models", str(REPO / "models.yaml"), "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--repeats 0: Input should be greater than or equal to 1" in r.output, r.output
    assert not any(tmp_path.iterdir())


DECODE_WORDS = "--decode 'xml': Input should be 'none', 'json' or 'yaml'"
TOOL_MODE_WORDS = "--tool-mode 'xml': Input should be 'native', 'prompt', 'json' or 'yaml'"


@pytest.mark.parametrize(
    ("command", "flags", "says"),
    [
        ("bench", ["--decode", "xml"], DECODE_WORDS),
        ("load", ["--decode", "xml"], DECODE_WORDS),
        ("compare", ["--decode", "xml"], DECODE_WORDS),
        ("compare", ["--decode", "none,xml"], DECODE_WORDS),  # an item of compare's list, in the same words
        ("bench", ["--tool-mode", "xml"], TOOL_MODE_WORDS),
        ("load", ["--tool-mode", "xml"], TOOL_MODE_WORDS),
        ("compare", ["--tool-mode", "xml"], TOOL_MODE_WORDS),
        ("compare", ["--tool-mode", "json,xml"], TOOL_MODE_WORDS),
    ],
)
def test_a_bad_mode_gets_the_spec_s_message_from_every_command(
    command: str, flags: list[str], says: str, tmp_path: Path
) -> None:
    """--decode and --tool-mode are validated by RunSpec in bench, load and compare alike (load and compare once
    checked them against the Literals themselves, in words of their own)."""
    args = [command, *(["gemma3-270m"] if command == "compare" else []), *flags]
    r = CliRunner().invoke(app, [*args, "--models", str(REPO / "models.yaml"), "--out", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert f"error: {says}" in " ".join(r.output.split()) and "Traceback" not in r.output
    assert not any(tmp_path.iterdir())


def test_bench_flags_keeps_what_was_given() -> None:
    from rig.cli.common import bench_flags

    values = {"limit": 2, "repeats": 1, "models_file": Path("m.yaml"), "gpu": None}
    assert bench_flags(values, ["a=1"], given={"limit"}) == {"limit": 2, "options": {"a": "1"}}
    got = bench_flags(values, [], absolute_models=True)
    assert got == {"limit": 2, "repeats": 1, "models_file": Path("m.yaml").resolve()}


def test_an_export_format_or_allowlist_entry_that_is_wrong_exits_2_naming_it(tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "run_before_issue17", run)
    r = CliRunner().invoke(app, ["export", str(run), "--format", "insp"])
    assert r.exit_code == 2 and "--format 'insp': choose csv, jsonl, parquet or inspect" in r.output
    r = CliRunner().invoke(app, ["export", str(run), "--mlflow", "http://127.0.0.1:1", "--allow-host", "lab"])
    assert r.exit_code == 2 and "--allow-host 'lab': expected HOST:PORT" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["export", str(run), "--mlflow", "http://192.0.2.5:5000"])
    assert r.exit_code == 2
    assert "refused outbound traffic to '192.0.2.5' port 5000" in " ".join(r.output.split())
