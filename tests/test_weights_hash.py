"""The weights' sha256 a run records: a parts model's from its verified entry, a plain file's hashed once and cached
by (resolved path, device, inode, size, mtime, ctime), a damaged or foreign cache entry ignored, a file edited in
place (mtime put back) hashed anew; `rig bench` writes it to the manifest,
older manifests without it still read."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rig import weight_parts
from rig.execution import bench
from rig.execution.bench import run_bench
from rig.registry import load_registry
from rig.runfolder.manifest import RunManifest
from rig.weight_parts import file_key
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
    stamp = HashStamp.model_validate_json(stamp_file((str(w), *file_key(st))).read_text())
    assert (stamp.path, stamp.sha256) == (str(w), want)
    # the file changes (same size, a new mtime): hashed anew, never the old entry's value
    w.write_bytes(b"GGUF" + os.urandom(100_000))
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert weights_sha256(file_spec(w), str(w)) == (hashlib.sha256(w.read_bytes()).hexdigest(), None)
    assert len(calls) == 2


def _entry(w: Path, **change: object) -> bytes:
    names = ("path", "device", "inode", "size", "mtime_ns", "ctime_ns")
    fields = dict(zip(names, (str(w), *file_key(w.stat())), strict=True))
    return json.dumps(fields | change).encode()


@pytest.mark.parametrize(
    "damage",
    [
        lambda w: b"{not json",
        lambda w: _entry(w, path="/elsewhere", size=1, sha256="0" * 64),  # another file's
        lambda w: _entry(w, sha256="not a hash"),
        lambda w: _entry(w, sha256="a" * 64, extra=1),
        lambda w: _entry(w, sha256="a" * 64, ctime_ns=None),
        lambda w: b"",
    ],
    ids=["broken-json", "other-file", "bad-sha", "extra-field", "no-ctime", "empty"],
)
def test_a_bad_cache_entry_is_ignored_and_the_file_hashed_again(
    damage: Callable[[Path], bytes], cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = tmp_path / "w.gguf"
    w.write_bytes(b"weights" * 1000)
    where = stamp_file((str(w), *file_key(w.stat())))
    where.parent.mkdir(parents=True)
    where.write_bytes(damage(w))
    calls = count_hashing(monkeypatch)
    assert weights_sha256(file_spec(w), str(w)) == (hashlib.sha256(w.read_bytes()).hexdigest(), None)
    assert calls == [w]
    assert HashStamp.model_validate_json(where.read_text()).sha256 == hashlib.sha256(w.read_bytes()).hexdigest()


def test_a_wrong_hash_in_a_matching_entry_is_what_the_cache_says(cache: Path, tmp_path: Path) -> None:
    """The cache is trusted for the file it names (that is its point); this pins that it is the cache's value that
    comes back, so the test above shows the re-hash is a real one."""
    w = tmp_path / "w.gguf"
    w.write_bytes(b"weights")
    where = stamp_file((str(w), *file_key(w.stat())))
    where.parent.mkdir(parents=True)
    where.write_bytes(_entry(w, sha256="b" * 64))
    assert weights_sha256(file_spec(w), str(w)) == ("b" * 64, None)


def edit_in_place(path: Path) -> None:
    """One byte changed with size, inode and mtime kept (`touch -r`), past the kernel's coarse clock tick so that
    the edit's ctime is a new one."""
    before = path.stat()
    time.sleep(0.05)
    with open(path, "r+b") as f:
        f.seek(5)
        f.write(bytes([path.read_bytes()[5] ^ 0x01]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_a_file_edited_in_place_with_its_mtime_put_back_is_hashed_anew(cache: Path, tmp_path: Path) -> None:
    """The manifest records the hash of the bytes loaded, not the cache entry of the file as it was."""
    w = tmp_path / "w.gguf"
    w.write_bytes(b"GGUF" + os.urandom(10_000))
    first, _ = weights_sha256(file_spec(w), str(w))
    edit_in_place(w)
    now = hashlib.sha256(w.read_bytes()).hexdigest()
    assert first != now and weights_sha256(file_spec(w), str(w)) == (now, None)


def parts_spec(site: Path, prefix: str):  # type: ignore[no-untyped-def]
    from rig.weight_parts import Parts
    from tests.partpkgs import install_parts, part_bytes, parts_entry

    chunks = part_bytes(3)
    install_parts(site, prefix, "1.0.0", chunks)
    parts = Parts.model_validate(parts_entry(prefix, "1.0.0", chunks))
    return load_registry().get("gemma3-270m").model_copy(update={"weights": _weights(parts=parts)}), parts  # type: ignore[arg-type]


def test_a_parts_model_takes_its_verified_entrys_sha256_without_hashing(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    spec, parts = parts_spec(tmp_path, "rigtest-hash-part")
    joined = weight_parts.assemble(parts)
    calls = count_hashing(monkeypatch)
    assert weights_sha256(spec, str(joined)) == (parts.sha256, None)
    assert calls == []


def test_a_parts_file_altered_after_it_was_verified_records_the_bytes_there(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changed between its check and the load: the manifest gets the hash of what is there, never the entry's."""
    monkeypatch.syspath_prepend(str(tmp_path))
    spec, parts = parts_spec(tmp_path, "rigtest-hash-part")
    joined = weight_parts.assemble(parts)
    edit_in_place(joined)
    assert weights_sha256(spec, str(joined)) == (hashlib.sha256(joined.read_bytes()).hexdigest(), None)
    sha, why = weights_sha256(spec, str(tmp_path / "gone.gguf"))
    assert sha is None and why and "gone.gguf" in why


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
