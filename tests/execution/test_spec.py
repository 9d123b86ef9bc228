"""RunSpec: bounds on the type (the library API included), conflicts refused before the model loads, spec files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rig.execution.bench import BenchError, BenchOptions, _build, run_bench
from rig.runfolder.spec import MAX_REPEATS, RunSpec, SpecError, read_spec, spec_error, write_spec


@pytest.mark.parametrize(
    "field,value,flag",
    [
        ("gpu", -1, "--gpu"),
        ("repeats", 0, "--repeats"),
        ("repeats", 1_000_000_000, "--repeats"),
        ("decode", "xml", "--decode"),
        ("tool_mode", "xml", "--tool-mode"),
        ("temperature", float("inf"), "--temperature"),
        ("temperature", float("nan"), "--temperature"),
        ("temperature", -0.5, "--temperature"),
        ("concurrency", 0, "--concurrency"),
        ("limit", 0, "--limit"),
        ("max_tokens", 0, "--max-tokens"),
        ("order", "random", "--order"),
    ],
)
def test_out_of_bounds_settings_are_refused_by_the_library_api(field: str, value: object, flag: str) -> None:
    with pytest.raises(ValidationError) as exc:
        BenchOptions(model="gemma3-270m", **{field: value})  # type: ignore[arg-type]
    assert spec_error(exc.value).args[0].startswith(f"{flag} {value!r}: ")


def test_a_bad_shard_is_named_once() -> None:
    with pytest.raises(ValidationError) as exc:
        RunSpec(shard="2/2")
    assert str(spec_error(exc.value)) == "--shard: '2/2': expected I/N with 0 <= I < N, e.g. 0/2"


def test_the_repeat_bound_is_the_documented_one() -> None:
    assert RunSpec(repeats=MAX_REPEATS).repeats == MAX_REPEATS
    with pytest.raises(ValidationError):
        RunSpec(repeats=MAX_REPEATS + 1)


def test_a_spec_is_frozen_and_refuses_unknown_settings() -> None:
    s = RunSpec(model="m")
    with pytest.raises(ValidationError):
        s.gpu = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        RunSpec(model="m", gpus=1)  # type: ignore[call-arg]


def test_tool_mode_follows_decode_only_when_not_given() -> None:
    assert RunSpec(decode="json").tool_mode == "json"
    assert RunSpec(decode="yaml", tool_mode="native").tool_mode == "native"
    assert RunSpec(decode="none").tool_mode == "prompt"
    # not given at all: not set either, so --resume takes the recorded one
    assert "tool_mode" not in RunSpec(model="m").model_fields_set


@pytest.mark.parametrize("decode,fmt", [("json", "yaml"), ("yaml", "json")])
def test_decode_against_callnavi_format_is_refused_before_the_model_loads(
    tmp_path: Path, embedded_weights: str, decode: str, fmt: str
) -> None:
    opts = BenchOptions(
        model="gemma3-270m", benchmark="callnavi", decode=decode, options={"format": fmt}, out=tmp_path / "runs"
    )
    with pytest.raises(BenchError) as exc:
        _build(opts)
    assert f"--decode {decode}" in str(exc.value) and f"callnavi.format={fmt}" in str(exc.value)
    with pytest.raises(BenchError):
        run_bench(opts)
    assert not (tmp_path / "runs").exists()  # nothing written: no run folder of crashed episodes


def test_decode_implies_callnavi_format_in_a_run_of_every_benchmark(embedded_weights: str) -> None:
    with pytest.raises(BenchError, match=r"--decode json conflicts with callnavi.format=yaml"):
        _build(BenchOptions(model="gemma3-270m", decode="json", options={"callnavi.format": "yaml"}, limit=1))
    _s, _w, chosen, _cfg, _sk = _build(BenchOptions(model="gemma3-270m", benchmark="callnavi", decode="yaml", limit=1))
    assert chosen[0][0].opts.format == "yaml"


def test_a_spec_file_round_trips_json_values(tmp_path: Path) -> None:
    options = {"routeeval.pack": ["helsinki", "us50"], "urbangeo.judge": None, "x.nested": {"a": [1, {"b": None}]}}
    spec = RunSpec(model="m", options=options, decode="json", gpu=1)
    back = read_spec(write_spec(tmp_path / "spec.json", spec))
    assert back == spec and back.options == options
    # only what was set travels: the model's own sampling stays the model's
    assert set(json.loads((tmp_path / "spec.json").read_text())) == {"model", "options", "decode", "tool_mode", "gpu"}


@pytest.mark.parametrize(
    "text,where",
    [
        ('{"model": "m", "gpu": -1}', "gpu"),
        ('{"model": "m", "repeat": 2}', "repeat"),
        ('{"model": "m", "temperature": 1e999}', "temperature"),
        ("[1]", "expected a JSON object"),
        ("{", "not valid JSON"),
    ],
)
def test_a_bad_spec_file_is_named_with_its_field(tmp_path: Path, text: str, where: str) -> None:
    f = tmp_path / "spec.json"
    f.write_text(text)
    with pytest.raises(SpecError) as exc:
        read_spec(f)
    assert str(exc.value).startswith(f"{f}: {where}")
    with pytest.raises(SpecError, match="not found"):
        read_spec(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"model": "m", "limit": true}', "limit"),  # was read as --limit 1
        ('{"model": "m", "repeats": "3"}', "repeats"),
        ('{"model": "m", "max_tokens": 1e12}', "max_tokens"),  # was 10**12, past any engine
        ('{"model": "m", "max_tokens": 1000000000000}', "max_tokens"),
        ('{"model": "m", "seed": 1.0}', "seed"),
        ('{"model": "m", "options": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON (nested more than"),
    ],
)
def test_a_spec_file_is_read_strictly_and_bounded(tmp_path: Path, text: str, where: str) -> None:
    f = tmp_path / "spec.json"
    f.write_text(text)
    with pytest.raises(SpecError) as exc:
        read_spec(f)
    assert str(exc.value).startswith(f"{f}: {where}"), str(exc.value)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_fifo_or_device_as_spec_is_refused_without_hanging(tmp_path: Path, kind: str) -> None:
    """`rig bench --spec FIFO` waited forever for a writer; `--spec /dev/zero` read without end (issue 37)."""
    import os
    import subprocess
    import sys

    path = Path("/dev/zero")
    if kind == "fifo":
        path = tmp_path / "spec.json"
        os.mkfifo(path)
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", "bench", "--spec", str(path), "--out", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    says = "is a FIFO (named pipe), not a file" if kind == "fifo" else "is a character device, not a file"
    assert r.returncode == 2 and f"{path}: {says}" in " ".join(r.stderr.split()), r.stderr
    assert not (tmp_path / "runs").exists()


def test_every_command_without_seed_records_the_same_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """rig bench, compare, load and sweep: one default seed, recorded in each run's spec, so their --limit samples
    are the same questions (before, `rig bench` recorded none and sampled with the model's seed)."""
    from rig.analyses.compare import cell_spec
    from rig.analyses.load.run import run_load
    from rig.execution import bench
    from rig.execution.bench import bench_options
    from rig.runfolder.manifest import RunManifest
    from rig.runfolder.spec import DEFAULT_SEED
    from rig.sweep.spec import load_sweep
    from tests.analyses.load.test_load import _stood_in_load
    from tests.execution.test_bench_efficiency import MODELS, DecodingEngine

    (tmp_path / "models.yaml").write_text(MODELS.replace("{file: w.gguf}", "{file: w.gguf}\n    sampling: {seed: 5}"))
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: DecodingEngine(spec, weights))
    flags = {"model": "tiny", "benchmark": "callnavi", "limit": 1, "models_file": tmp_path / "models.yaml"}

    run = run_bench(bench_options({**flags, "out": tmp_path / "runs", "idle_window_s": 0.0}))
    manifest = RunManifest.read(run)
    assert manifest.run_spec().seed == DEFAULT_SEED and manifest.config.seed == DEFAULT_SEED  # not the model's 5
    assert cell_spec("tiny", bench_options(flags)).seed == DEFAULT_SEED
    calls, settings = _stood_in_load(tmp_path / "load", monkeypatch, ends={}, levels=(1, 2))  # a load has two levels
    run_load(settings)
    assert [spec.seed for spec, _ in calls] == [DEFAULT_SEED, DEFAULT_SEED]
    (tmp_path / "sweep.yaml").write_text("models: [tiny]\nbenchmarks: [callnavi]\nmodels_file: models.yaml\n")
    _, cells = load_sweep(tmp_path / "sweep.yaml")
    assert [c.spec().seed for c in cells] == [DEFAULT_SEED]
