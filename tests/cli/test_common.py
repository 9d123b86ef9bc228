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


def five_run(tmp_path: Path) -> Path:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "run_before_issue17", run)
    return run


def rig_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str]:
    """`rig ARGS` as its own process, under a timeout (an export that waits on a server must not hold the suite)."""
    import os
    import subprocess
    import sys

    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout
    )
    return r.returncode, r.stdout + r.stderr


@pytest.mark.parametrize(
    ("uri", "env", "says"),
    [
        ("", {}, "--mlflow '': no tracking URI"),  # wrote ./mlflow.db and ./mlruns
        ("mlruns", {}, "--mlflow 'mlruns': no scheme"),
        ("databricks", {"DATABRICKS_HOST": "https://192.0.2.7"}, "a Databricks workspace is not reachable offline"),
        ("http://evil\\@127.0.0.1/", {}, "is not allowed in a URI"),
        ("http://[x]/", {}, r"--mlflow 'http://[x]/': [x] is not an IPv6 address"),
        ("http://127.0.0.1\x1b[2J:5000/", {}, r"'\\x1b' is not allowed in a URI"),
        ("http://127.0.0.1:5000", {"MLFLOW_TRACKING_URI": "databricks"}, "MLFLOW_TRACKING_URI 'databricks'"),
    ],
    ids=["empty", "no-scheme", "databricks", "backslash", "bad-ipv6", "escape", "tracking-env"],
)
def test_a_tracking_uri_is_refused_before_anything_is_written(
    uri: str, env: dict[str, str], says: str, tmp_path: Path
) -> None:
    run = five_run(tmp_path)
    code, output = rig_cli(["export", str(run), "--mlflow", uri], tmp_path, env)
    assert code == 2, output
    assert says in " ".join(output.split()) and "Traceback" not in output and "\x1b" not in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no mlflow.db, no mlruns


def test_a_file_store_uri_is_a_named_error(tmp_path: Path) -> None:
    """`--mlflow file:PATH`, which the help once offered: MLflow 3 refuses a file store; named, never a traceback."""
    run = five_run(tmp_path)
    code, output = rig_cli(["export", str(run), "--mlflow", f"file:{tmp_path / 'mlruns'}"], tmp_path)
    text = " ".join(output.split())
    assert "Traceback" not in output
    assert code == 0 or (code == 2 and f"MLflow at file:{tmp_path / 'mlruns'}" in text and "sqlite:///" in text)


def test_a_password_in_the_tracking_uri_is_never_printed(tmp_path: Path) -> None:
    from rig.engines.server import free_port

    run = five_run(tmp_path)
    uri = f"http://user:s3cret@127.0.0.1:{free_port()}"  # nothing listens: the export fails, naming the server
    code, output = rig_cli(["export", str(run), "--mlflow", uri], tmp_path)
    assert code == 2 and "s3cret" not in output, output
    assert "MLflow at http://user:***@127.0.0.1:" in " ".join(output.split())


def test_an_allowlist_entry_or_variable_that_is_wrong_is_named_never_a_traceback(tmp_path: Path) -> None:
    run = five_run(tmp_path)
    code, output = rig_cli(["export", str(run), "--mlflow", "http://127.0.0.1:1", "--allow-host", "lab:٥٠٠٠"], tmp_path)
    assert code == 2 and "--allow-host 'lab:٥٠٠٠': the port must be a number from 1 to 65535" in output, output
    code, output = rig_cli(["doctor"], tmp_path, {"RIG_ALLOW_HOSTS": "garbage"}, timeout=300)
    assert code == 1 and "Traceback" not in output, output  # a failed check, with the others still shown
    assert "RIG_ALLOW_HOSTS 'garbage': expected" in " ".join(output.replace("│", " ").split())
    assert "callnavi" in output


def test_a_tracking_server_that_never_answers_ends_the_export(tmp_path: Path) -> None:
    """A server that takes the connection and never answers: the export ends with a named error instead of waiting
    on MLflow's two-minute timeout three times over (rig's own request timeout and retries: about a minute)."""
    import socket

    run = five_run(tmp_path)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshakes; nothing ever reads or answers
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        code, output = rig_cli(["export", str(run), "--mlflow", uri], tmp_path, timeout=150)
    assert code == 2 and f"MLflow at {uri}" in " ".join(output.split()), output


@pytest.mark.parametrize("command", ["bench", "compare", "load"])
@pytest.mark.parametrize("seed", [str(1 << 64), str(-(1 << 63) - 1)])
def test_a_seed_no_engine_takes_is_refused_before_the_model_loads(command: str, seed: str, tmp_path: Path) -> None:
    """A seed past 64 bits reached model load, where llama-cpp-python's ctypes call failed ("int too long")."""
    args = [command, *(["gemma3-270m", "--decode", "none,json"] if command == "compare" else []), "--seed", seed]
    args += ["--models", str(REPO / "models.yaml"), "--out", str(tmp_path), "-b", "callnavi"]
    r = CliRunner().invoke(app, args)
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and f"--seed {seed}: Input should be" in said and "Traceback" not in said, r.output
    assert not any(tmp_path.iterdir())
