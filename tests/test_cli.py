"""CLI flag resolution that does not need a model."""

import pytest
from typer.testing import CliRunner

from rig.cli import app
from rig.cli.common import bench_flags
from rig.execution.bench import bench_options
from rig.runfolder.spec import SpecError


def _tool_mode(decode: str, tool_mode: str | None = None) -> str:
    """The tool mode the flags ask for, through the path bench, compare and load take (bench_flags, bench_options)."""
    return bench_options(bench_flags({"decode": decode, "tool_mode": tool_mode}, [])).tool_mode


def test_decode_also_constrains_tool_calls_unless_tool_mode_is_given() -> None:
    assert _tool_mode("json") == "json" and _tool_mode("yaml") == "yaml"
    assert _tool_mode("none") == "prompt"
    assert _tool_mode("json", "native") == "native" and _tool_mode("yaml", "prompt") == "prompt"
    with pytest.raises(SpecError, match="--tool-mode 'xml'"):
        _tool_mode("none", "xml")


def test_bad_tool_mode_exits_2_naming_the_flag() -> None:
    r = CliRunner().invoke(app, ["bench", "--tool-mode", "xml"])
    assert r.exit_code == 2 and "--tool-mode 'xml'" in r.output


def test_format_on_a_benchmark_without_one_is_refused() -> None:
    r = CliRunner().invoke(app, ["bench", "-b", "routeeval", "--format", "yaml"])
    assert r.exit_code == 2 and "CallNavi's answer format" in r.output


# --- bad input is a message naming the flag or file, exit 2, before any model loads (issue 18) -------------------

FAKE_MODELS = (
    "models:\n  fake:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: none\n"
    "    context_length: 4096\n"
)


def _fake_registry(tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "models.yaml").write_text(FAKE_MODELS)
    (tmp_path / "w.gguf").write_bytes(b"")
    return ["--models", str(tmp_path / "models.yaml"), "--model", "fake"]


@pytest.fixture
def fake_engine(monkeypatch):  # type: ignore[no-untyped-def]
    from rig.execution import bench
    from tests.execution.killable import ThreadedFakeEngine

    monkeypatch.setenv("KILLABLE_DELAY", "0")
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: ThreadedFakeEngine(spec, weights))


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--order", "random"], "--order 'random'"),
        (["--temperature", "-1"], "--temperature"),
        (["--resume", "../elsewhere/RID"], "--resume '../elsewhere/RID'"),
    ],
)
def test_bad_flags_exit_2_before_anything_is_written(tmp_path, flags, says) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "runs"
    r = CliRunner().invoke(app, ["bench", *_fake_registry(tmp_path), "-b", "callnavi", "--out", str(out), *flags])
    assert r.exit_code == 2 and says in r.output, r.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--temperature", "inf"], "--temperature inf: Input should be a finite number"),
        (["--temperature", "nan"], "--temperature nan: Input should be a finite number"),
        (["--repeats", "1000000000"], "--repeats 1000000000: Input should be less than or equal to 10000"),
        (["--gpu", "-1"], "--gpu -1: Input should be greater than or equal to 0"),
        (["--decode", "json", "-O", "format=yaml"], "--decode json conflicts with callnavi.format=yaml"),
        (["--decode", "yaml", "--format", "json"], "--decode yaml conflicts with callnavi.format=json"),
        (["--repeats", "3", "--pass-k", "1,4"], "--pass-k 1,4: k = 4 is outside 1 to --repeats 3"),
        (["--repeats", "3", "--pass-k", "0,3"], "--pass-k 0,3: k = 0 is outside 1 to --repeats 3"),
        (["--pass-k", "2"], "--pass-k 2: k = 2 is outside 1 to --repeats 1"),
        (["--repeats", "3", "--pass-k", "1,x"], "--pass-k: '1,x': expected whole numbers separated by commas"),
    ],
)
def test_bad_run_settings_exit_2_before_the_model_loads(tmp_path, flags, says) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "runs"
    r = CliRunner().invoke(app, ["bench", *_fake_registry(tmp_path), "-b", "callnavi", "--out", str(out), *flags])
    assert r.exit_code == 2 and says in r.output, r.output
    assert not out.exists() and "Traceback" not in r.output


def test_a_spec_file_is_read_and_a_bad_one_named(tmp_path, fake_engine) -> None:  # type: ignore[no-untyped-def]
    import json

    reg = _fake_registry(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"model": "fake", "benchmark": "callnavi", "gpu": -1}))
    out = tmp_path / "runs"
    r = CliRunner().invoke(app, ["bench", *reg[:2], "--spec", str(spec), "--out", str(out)])
    assert r.exit_code == 2 and f"{spec}: gpu: -1: Input should be greater" in r.output, r.output
    spec.write_text(json.dumps({"model": "fake", "benchmark": "callnavi", "options": {"task": "routing"}, "limit": 1}))
    r = CliRunner().invoke(app, ["bench", *reg[:2], "--spec", str(spec), "--limit", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    (run,) = out.iterdir()
    from rig.runfolder.manifest import RunManifest

    man = RunManifest.read(run)  # the file's settings, the flag winning over the file
    assert man.config.limit == 2 and man.config.benchmarks[0].options["task"] == "routing"


def test_out_on_a_file_or_under_one_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "afile").write_text("")
    for out, says in (
        (tmp_path / "afile", "is a file"),
        (tmp_path / "afile" / "sub", "cannot create it (Not a directory)"),
    ):
        r = CliRunner().invoke(app, ["bench", *_fake_registry(tmp_path), "-b", "callnavi", "--out", str(out)])
        assert r.exit_code == 2 and f"--out {out}" in r.output and says in r.output, r.output


@pytest.mark.parametrize(("damage", "says"), [("bytes", "not UTF-8 text"), ("folder", "is a directory, not a file")])
def test_an_unreadable_questions_file_is_named(tmp_path, damage, says) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from rig.benchmarks.callnavi.benchmark import CallNavi

    data = tmp_path / "data"
    shutil.copytree(CallNavi().data, data)
    q = data / "Questions" / "maps.json"
    if damage == "bytes":
        q.write_bytes(b'[{"question": "caf\xe9"}]')
    else:
        q.unlink()
        q.mkdir()
    r = CliRunner().invoke(
        app,
        ["bench", *_fake_registry(tmp_path), "-b", "callnavi", "--data", str(data), "--out", str(tmp_path / "runs")],
    )
    assert r.exit_code == 2 and f"{q}: {says}" in r.output, r.output


def test_a_failed_load_marks_the_run_failed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    pytest.importorskip("llama_cpp")
    out = tmp_path / "runs"
    r = CliRunner().invoke(
        app, ["bench", *_fake_registry(tmp_path), "-b", "callnavi", "--limit", "1", "--out", str(out)]
    )
    assert r.exit_code == 2 and "could not load" in r.output, r.output
    (run_dir,) = out.iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("with_model", [False, True])
@pytest.mark.parametrize(
    "flags",
    [["--max-tokens", "7"], ["--limit", "3"], ["--repeats", "2"], ["--temperature", "0.5"], ["--decode", "json"]],
)
def test_resume_refuses_changed_flags_with_or_without_model(
    tmp_path,
    fake_engine,
    flags,  # type: ignore[no-untyped-def]
    with_model,
) -> None:
    reg = _fake_registry(tmp_path)
    out = tmp_path / "runs"
    r = CliRunner().invoke(
        app, ["bench", *reg, "-b", "callnavi", "-O", "task=routing", "--limit", "2", "--out", str(out), "--no-report"]
    )
    assert r.exit_code == 0, r.output
    (run_dir,) = out.iterdir()
    base = ["bench", "--models", reg[1], *(reg[2:] if with_model else []), "--resume", run_dir.name, "--out", str(out)]
    r = CliRunner().invoke(app, [*base, *flags, "--no-report"])
    assert r.exit_code == 2 and "configuration changed" in r.output, r.output
    field = {
        "--max-tokens": "max_tokens",
        "--limit": "limit",
        "--repeats": "repeats",
        "--temperature": "temperature",
        "--decode": "decode",
    }[flags[0]]
    assert f"{field}:" in r.output
    r = CliRunner().invoke(app, [*base, "--no-report"])  # unchanged: resumes
    assert r.exit_code == 0, r.output


def test_pass_k_on_resume_is_checked_against_the_runs_own_repeats(tmp_path, fake_engine) -> None:  # type: ignore[no-untyped-def]
    """A resumed run's repeats come from its record: --pass-k 2 fits a run of 2 repeats (not refused against the
    default of 1), --pass-k 3 is refused naming the flag, before anything runs."""
    reg = _fake_registry(tmp_path)
    out = tmp_path / "runs"
    args = ["bench", *reg, "-b", "callnavi", "-O", "task=routing", "--limit", "1", "--repeats", "2", "--out", str(out)]
    r = CliRunner().invoke(app, [*args, "--no-report", "--temperature", "0.5"])
    assert r.exit_code == 0, r.output
    (run_dir,) = out.iterdir()
    base = ["bench", "--models", reg[1], "--resume", run_dir.name, "--out", str(out), "--no-report"]
    r = CliRunner().invoke(app, [*base, "--pass-k", "3"])
    assert r.exit_code == 2 and "--pass-k 3: k = 3 is outside 1 to --repeats 2" in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--pass-k", "2"])
    assert r.exit_code == 0, r.output


def test_compare_refuses_a_pass_k_above_repeats_before_anything_runs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    reg = _fake_registry(tmp_path)
    out = tmp_path / "cmp"
    r = CliRunner().invoke(
        app, ["compare", "fake", "--decode", "none,json", *reg[:2], "--pass-k", "5", "--out", str(out)]
    )
    assert r.exit_code == 2 and "--pass-k 5: k = 5 is outside 1 to --repeats 1" in r.output, r.output
    assert not out.exists()


def test_messages_with_square_brackets_print_as_written() -> None:
    # rich reads "[mobility]" as a markup tag and drops it unless the message is escaped
    r = CliRunner().invoke(app, ["bench", "-O", "pip install 'rig[mobility]'"])
    assert r.exit_code == 2 and "'rig[mobility]'" in r.output


def test_library_messages_keep_their_brackets() -> None:
    from rich.console import Console

    from rig.cli import say

    console = Console(record=True, width=200)
    say("skipped mobilitybench: needs pip install 'rig[mobility]' ([bold]x[/bold])", console)
    assert "pip install 'rig[mobility]' ([bold]x[/bold])" in console.export_text()


def test_final_screen_has_a_row_per_benchmark_within_40_lines(tmp_path) -> None:
    import shutil
    from pathlib import Path

    from rich.console import Console

    from rig.cli import print_screen
    from rig.render.screen import run_summaries

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "run_before_issue17", run)
    console = Console(record=True, width=80)
    print_screen(run, console)
    text = console.export_text()
    assert len(text.splitlines()) <= 40
    _man, sums = run_summaries(run)
    assert [s.benchmark for s in sums] == ["callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"]
    for s in sums:  # each row shows its RunSummary's numbers, not recomputed ones
        assert s.benchmark in text and f"{s.e2e_p50_s:.2f}" in text  # whole names, even at 80 columns (unit: header)
    assert "…" not in text  # nothing hidden behind an ellipsis: narrow cells fold
    assert "report.md" in text and "--html" in text


def _readme_first_bench() -> list[str]:
    """The `rig bench ...` of the README's first command, as a new user copies it."""
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash", 1)[1].split("```", 1)[0]
    first = block.strip().splitlines()[0].split("#", 1)[0]
    m = re.search(r"&& (rig bench[^&]*)", first)
    assert m, f"README's first command has no `rig bench`: {first}"
    return shlex.split(m.group(1))[1:]


def _run_readme_first_bench(tmp_path, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Run `rig bench` with the README's first command's arguments (limit 1 here), inside `unshare -n` where the
    machine allows it: every benchmark runs (none skipped for a missing extra), llama.cpp's native logs stay off the
    terminal and in the run's engine.log, and the run ends with one screen of a row per benchmark."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from rig.runfolder.manifest import RunManifest

    repo = Path(__file__).resolve().parents[1]
    assert args[:1] == ["bench"] and "--benchmark" not in args and "-b" not in args
    cmd = [sys.executable, "-m", "rig.cli", *args, "--limit", "1", "--out", str(tmp_path / "runs")]
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        cmd = ["unshare", "-n", "bash", "-c", 'ip link set lo up && exec "$@"', "bash", *cmd]
    env = os.environ | {"PYTHONPATH": str(repo), "COLUMNS": "100"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipped" not in r.stderr, r.stderr
    (run,) = (tmp_path / "runs").iterdir()
    names = [b.name for b in RunManifest.read(run).config.benchmarks]
    assert names == ["callnavi", "evgeoqa", "mobilitybench", "routeeval", "urbangeo"]
    assert "llama_" not in r.stderr + r.stdout  # native logs went to the run folder instead
    assert "llama_" in (run / "engine.log").read_text(encoding="utf-8")
    assert len(r.stdout.splitlines()) <= 40, r.stdout
    for name in names:
        assert any(line.split()[:1] == [name] for line in r.stdout.splitlines()), (name, r.stdout)
    assert (run / "report.md").is_file() and (run / "report.html").is_file()


@pytest.mark.slow
def test_readme_first_bench_runs_all_five_benchmarks_offline(tmp_path, helsinki_pack) -> None:  # type: ignore[no-untyped-def]
    """The README's first `rig bench` as written, on its Qwen2.5-Coder 0.5B: about 6 minutes on two cores, so it is
    out of the default selection (`python3 -m pytest -m slow tests/test_cli.py` runs it)."""
    pytest.importorskip("llama_cpp")
    args = _readme_first_bench()
    assert "--model" in args
    _run_readme_first_bench(tmp_path, args)


@pytest.mark.model
def test_readme_first_bench_on_the_embedded_model_runs_all_five_benchmarks_offline(  # type: ignore[no-untyped-def]
    tmp_path, helsinki_pack, embedded_weights
) -> None:
    """The same command with the README's model swapped for the embedded gemma3-270m, its replies capped at 32
    tokens (uncapped, the 270M runs every reply to max_tokens: 7 CPU minutes): what the first command exercises
    besides the model (every benchmark's extra, the map pack, no network, the log routing and the one screen) checked
    in the default selection."""
    args = _readme_first_bench()
    i = args.index("--model")
    _run_readme_first_bench(tmp_path, [*args[:i], "--model", "gemma3-270m", *args[i + 2 :], "--max-tokens", "32"])


def test_infinite_temperature_never_leaves_an_unreadable_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A temperature JSON cannot hold is refused before any episode runs (exit 2), and no run folder is left that
    `rig report` / `rig export` would refuse."""
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  m:\n    engine: llamacpp\n    weights: {file: w.gguf}\n"
        "    quantization: q4\n    context_length: 64\n"
    )
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    out = tmp_path / "runs"
    args = ["bench", "--models", str(models), "--model", "m", "--benchmark", "callnavi", "--limit", "1"]
    r = CliRunner().invoke(app, [*args, "--out", str(out), "--temperature", "inf"])
    assert r.exit_code == 2, r.output
    assert "temperature" in r.output and "Traceback" not in r.output
    assert not out.exists() or not list(out.iterdir())


def test_an_unreadable_bundle_manifest_leaves_no_run_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The bundle id is read from the MANIFEST.json beside models.yaml before the run folder is made, so a manifest
    that cannot be read (nested past the JSON parser's depth) stops the run with nothing created under --out."""
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  m:\n    engine: llamacpp\n    weights: {file: w.gguf}\n"
        "    quantization: q4\n    context_length: 64\n"
    )
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    (tmp_path / "MANIFEST.json").write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "runs"
    args = ["bench", "--models", str(models), "--model", "m", "--benchmark", "callnavi", "--limit", "1"]
    r = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 2 and "MANIFEST.json" in r.output, r.output
    assert not out.exists() or not list(out.iterdir())


def test_format_is_the_flag_a_benchmark_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--format` is routed by what the benchmark declares (its flag_options), not by benchmark names in the CLI:
    with CallNavi's declaration gone, the flag is refused before anything runs."""
    from rig.benchmarks import flag_option
    from rig.benchmarks.callnavi.benchmark import CallNavi

    assert flag_option("format", "yaml", "callnavi") == {"format": "yaml"}
    assert flag_option("format", "yaml", None) == {"callnavi.format": "yaml"}
    monkeypatch.setattr(CallNavi, "flag_options", {})
    r = CliRunner().invoke(app, ["bench", "-b", "callnavi", "--format", "yaml"])
    assert r.exit_code == 2 and "benchmark callnavi has none" in r.output, r.output
