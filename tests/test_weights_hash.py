"""The weights' sha256 a run records: a parts model's from its verified entry, a plain file's hashed once and cached
by (resolved path, size, mtime), a damaged or foreign cache entry ignored; `rig bench` writes it to the manifest,
older manifests without it still read."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from rig import weight_parts
from rig.execution import bench
from rig.execution.bench import run_bench
from rig.registry import load_registry
from rig.runfolder.manifest import RunManifest
from rig.weights_hash import HashStamp, stamp_file, weights_sha256
from tests.execution import test_bench_efficiency as eff


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def file_spec(path: Path):  # type: ignore[no-untyped-def]
    return load_registry().get("gemma3-270m").model_copy(update={"weights": _weights(file=str(path))})


def _weights(**kw: str):  # type: ignore[no-untyped-def]
    from rig.registry import Weights

    return Weights(**kw)


def count_hashing(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = weight_parts.file_sha256

    def counted(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(weight_parts, "file_sha256", counted)
    return calls


def test_a_plain_file_is_hashed_once_and_read_back_from_the_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = tmp_path / "w.gguf"
    w.write_bytes(b"GGUF" + os.urandom(100_000))
    want = hashlib.sha256(w.read_bytes()).hexdigest()
    calls = count_hashing(monkeypatch)
    link = tmp_path / "link.gguf"
    link.symlink_to(w)
    assert weights_sha256(file_spec(w), str(w)) == (want, None)
    assert weights_sha256(file_spec(link), str(link)) == (want, None)  # the resolved path: the same entry
    assert calls == [w]
    st = w.stat()
    stamp = HashStamp.model_validate_json(stamp_file(str(w), st.st_size, st.st_mtime_ns).read_text())
    assert (stamp.path, stamp.sha256) == (str(w), want)
    # the file changes (same size, a new mtime): hashed anew, never the old entry's value
    w.write_bytes(b"GGUF" + os.urandom(100_000))
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert weights_sha256(file_spec(w), str(w)) == (hashlib.sha256(w.read_bytes()).hexdigest(), None)
    assert len(calls) == 2


@pytest.mark.parametrize(
    "damage",
    [
        b"{not json",
        b'{"path": "/elsewhere", "size": 1, "mtime_ns": 1, "sha256": "' + b"0" * 64 + b'"}',  # another file's
        b'{"path": "P", "size": S, "mtime_ns": M, "sha256": "not a hash"}',
        b'{"path": "P", "size": S, "mtime_ns": M, "sha256": "' + b"a" * 64 + b'", "extra": 1}',
        b"",
    ],
    ids=["broken-json", "other-file", "bad-sha", "extra-field", "empty"],
)
def test_a_bad_cache_entry_is_ignored_and_the_file_hashed_again(
    damage: bytes, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = tmp_path / "w.gguf"
    w.write_bytes(b"weights" * 1000)
    st = w.stat()
    where = stamp_file(str(w), st.st_size, st.st_mtime_ns)
    where.parent.mkdir(parents=True)
    text = damage.replace(b'"P"', f'"{w}"'.encode()).replace(b"S,", f"{st.st_size},".encode())
    where.write_bytes(text.replace(b"M,", f"{st.st_mtime_ns},".encode()))
    calls = count_hashing(monkeypatch)
    assert weights_sha256(file_spec(w), str(w)) == (hashlib.sha256(w.read_bytes()).hexdigest(), None)
    assert calls == [w]
    assert HashStamp.model_validate_json(where.read_text()).sha256 == hashlib.sha256(w.read_bytes()).hexdigest()


def test_a_wrong_hash_in_a_matching_entry_is_what_the_cache_says(cache: Path, tmp_path: Path) -> None:
    """The cache is trusted for the file it names (that is its point); this pins that it is the cache's value that
    comes back, so the test above shows the re-hash is a real one."""
    w = tmp_path / "w.gguf"
    w.write_bytes(b"weights")
    st = w.stat()
    where = stamp_file(str(w), st.st_size, st.st_mtime_ns)
    where.parent.mkdir(parents=True)
    where.write_text(
        HashStamp(path=str(w), size=st.st_size, mtime_ns=st.st_mtime_ns, sha256="b" * 64).model_dump_json()
    )
    assert weights_sha256(file_spec(w), str(w)) == ("b" * 64, None)


def test_a_parts_model_takes_its_verified_entrys_sha256_without_hashing(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = next(s for s in load_registry().models.values() if s.weights.parts is not None)
    assert spec.weights.parts is not None
    calls = count_hashing(monkeypatch)
    assert weights_sha256(spec, "/nonexistent/joined.gguf") == (spec.weights.parts.sha256, None)
    assert calls == []


def test_weights_that_are_not_one_local_file_get_a_reason(cache: Path, tmp_path: Path) -> None:
    base = load_registry().get("gemma3-270m")
    for kw in ({"dir": str(tmp_path)}, {"served": "some-model"}, {"ollama": "gemma3:270m"}):
        sha, why = weights_sha256(base.model_copy(update={"weights": _weights(**kw)}), str(tmp_path))
        assert sha is None and why and "not hashed" in why
    sha, why = weights_sha256(file_spec(tmp_path / "gone.gguf"), str(tmp_path / "gone.gguf"))
    assert sha is None and why and "gone.gguf" in why


def test_bench_records_the_weights_sha256_in_the_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = tmp_path
    (tiny / "models.yaml").write_text(eff.MODELS)
    eff.write_gguf(tiny / "w.gguf", eff.LLAMA, [("token_embd.weight", [64, 1000], 64_000)])
    monkeypatch.setenv("RIG_CACHE", str(tiny / "cache"))
    monkeypatch.setattr(bench, "create_engine", lambda spec, weights, gpu=None: eff.DecodingEngine(spec, weights))
    run_dir = run_bench(eff.opts(tiny))
    man = RunManifest.read(run_dir)
    assert man.weights_sha256 == hashlib.sha256((tiny / "w.gguf").read_bytes()).hexdigest()
    assert man.weights_sha256_reason is None


def test_a_manifest_without_the_hash_still_reads() -> None:
    man = RunManifest.read(Path(__file__).parent / "fixtures" / "run_before_issue17")
    assert man.weights_sha256 is None and man.weights_sha256_reason is None
