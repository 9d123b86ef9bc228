"""`rig bundle verify`: links and special files named, never followed or opened; the bundle id and --expect; the
Ed25519 signature over MANIFEST.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.bundle import BundleError, CreateOptions, create, verify
from rig.cli import app
from tests.bundle.helpers import create_bundle, rehash_raw


@pytest.fixture
def bundle(registry: Path, tmp_path: Path) -> Path:
    out = tmp_path / "bundle"
    res = create_bundle(registry, out, models="tiny-q4")
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(autouse=True)
def _no_hang(no_hang: None) -> None:
    """Every test here: a FIFO opened for reading waits for a writer forever (conftest's ``no_hang``)."""


def _cli_verify(bundle: Path, *flags: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["bundle", "verify", str(bundle), *flags])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception  # no traceback
    return res.exit_code, " ".join(res.output.split())


def test_a_listed_file_replaced_by_a_symlink_outside_with_the_same_bytes_is_named(bundle: Path, tmp_path: Path) -> None:
    weight = bundle / "weights/tiny-q4/tiny-q4.gguf"
    outside = tmp_path / "outside.gguf"
    outside.write_bytes(weight.read_bytes())
    weight.unlink()
    weight.symlink_to(outside)
    rep = verify(bundle)
    assert not rep.ok
    assert rep.unsafe == [
        f"weights/tiny-q4/tiny-q4.gguf: a symbolic link (to {outside}); a bundle holds regular files only"
    ]
    assert rep.missing == [] and rep.altered == []


def test_an_unlisted_symlinked_folder_is_named_and_not_entered(bundle: Path) -> None:
    (bundle / "data" / "etc").symlink_to("/etc")
    rep = verify(bundle)
    assert rep.unsafe == ["data/etc: a symbolic link (to /etc); a bundle holds regular files only"]
    assert not any(p.startswith("data/etc/") for p in rep.extra)  # never walked into


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dangling", "loop"])
def test_special_files_are_named_not_opened(bundle: Path, kind: str) -> None:
    """A listed file that became a FIFO (no writer: reading it would wait forever), a link to /dev/zero (endless),
    a dangling link or a link loop: named with what it is, exit 2, no traceback, no hang."""
    rel = "models.yaml"
    target = bundle / rel
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    elif kind == "dangling":
        target.symlink_to(bundle / "no-such-file")
    else:
        target.symlink_to(bundle / "loop-b")
        (bundle / "loop-b").symlink_to(target)
    rep = verify(bundle)
    assert not rep.ok
    assert rel in {u.split(":")[0] for u in rep.unsafe}
    assert rel not in rep.missing
    (why,) = [u.split(": ", 1)[1] for u in rep.unsafe if u.startswith(rel + ":")]
    assert why.startswith("a FIFO" if kind == "fifo" else "a symbolic link")


def test_a_duplicate_manifest_entry_is_refused(bundle: Path) -> None:
    raw = json.loads((bundle / "MANIFEST.json").read_text())
    raw["files"].append(raw["files"][0])
    (bundle / "MANIFEST.json").write_text(json.dumps(raw))
    with pytest.raises(BundleError, match=r"files: .*listed twice"):
        verify(bundle)
    code, text = _cli_verify(bundle)
    assert code == 2 and "MANIFEST.json: files" in text and "listed twice" in text


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "data/./x", "MANIFEST.json"])
def test_a_listed_path_outside_the_bundle_is_refused(bundle: Path, path: str) -> None:
    raw = json.loads((bundle / "MANIFEST.json").read_text())
    raw["files"][0]["path"] = path
    (bundle / "MANIFEST.json").write_text(json.dumps(raw))
    code, text = _cli_verify(bundle)
    assert code == 2 and "MANIFEST.json: files" in text and path in text


def test_manifest_and_bundle_that_are_not_what_they_should_be(bundle: Path, tmp_path: Path) -> None:
    """MANIFEST.json a folder, a FIFO or nested past the parser's depth; the bundle argument a regular file: exit 2
    naming the path."""
    a_file = tmp_path / "not-a-bundle"
    a_file.write_text("x")
    code, text = _cli_verify(a_file)
    assert code == 2 and f"{a_file}: is not a folder" in text
    man = bundle / "MANIFEST.json"
    saved = man.read_bytes()
    man.unlink()
    man.mkdir()
    code, text = _cli_verify(bundle)
    assert code == 2 and f"{man}: a folder, not a regular file" in text
    man.rmdir()
    os.mkfifo(man)
    code, text = _cli_verify(bundle)
    assert code == 2 and f"{man}: a FIFO, not a regular file" in text
    man.unlink()
    man.write_text("[" * 100_000 + "]" * 100_000)
    code, text = _cli_verify(bundle)
    assert code == 2 and f"{man}: nested too deeply" in text
    man.write_text("[1]")
    code, text = _cli_verify(bundle)
    assert code == 2 and f"{man}: (top level)" in text
    man.write_bytes(saved)
    assert _cli_verify(bundle)[0] == 0


# --- the bundle id, --expect and signatures ---------------------------------------------------------------------


def test_the_id_is_the_manifest_hash_and_a_rehashed_bundle_gets_another(bundle: Path) -> None:
    made = verify(bundle)
    assert made.ok and made.bundle_id == made.claimed_id and len(made.bundle_id) == 32
    assert verify(bundle, expect=made.bundle_id).ok
    # Alter a file and re-hash the manifest, as anyone who can write the bundle can: the files verify...
    (bundle / "models.yaml").write_text("models: {}\n")
    rehash_raw(bundle)
    assert verify(bundle).ok
    # ...but it is not the bundle that was made.
    rep = verify(bundle, expect=made.bundle_id)
    assert not rep.ok and rep.bundle_id != made.bundle_id
    assert rep.problems == [f"--expect {made.bundle_id}: this bundle is {rep.bundle_id}, not the bundle that was made"]
    # Changing only what pip is told (no file) changes the id too.
    before = rep.bundle_id
    rehash_raw(bundle, requires=["numpy==2.0.0"])
    assert verify(bundle).bundle_id != before


def test_a_claimed_id_that_is_not_the_manifest_hash_is_named(bundle: Path) -> None:
    raw = json.loads((bundle / "MANIFEST.json").read_text())
    computed = raw["bundle_id"]
    raw["bundle_id"] = "0" * 32
    (bundle / "MANIFEST.json").write_text(json.dumps(raw))
    rep = verify(bundle)
    assert rep.bundle_id == computed and rep.claimed_id == "0" * 32
    assert not rep.ok and "claims 00000000000000000000000000000000" in rep.problems[0]


def test_a_wrong_expected_id_is_refused(bundle: Path) -> None:
    rep = verify(bundle, expect="f" * 32)
    assert not rep.ok and rep.problems[0].startswith("--expect ffff")
    assert rep.missing == rep.extra == rep.altered == rep.unsafe == []


def _create(registry: Path, out: Path, sign: Path) -> None:
    create(
        CreateOptions(
            out=out, models=["tiny-q4"], benchmarks=["callnavi"], models_file=registry, wheels=False, sign=sign
        )
    )


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    from rig.bundle.sign import keygen

    private = tmp_path / "keys" / "bundle-key"
    private.parent.mkdir()
    public, fp = keygen(private)
    assert fp.startswith("SHA256:") and public.read_text().startswith("ssh-ed25519 ")
    assert (private.stat().st_mode & 0o777) == 0o600
    with pytest.raises(BundleError, match="exists"):
        keygen(private)
    return private, public


def test_signature_holds_for_the_bundle_made_and_nothing_else(
    registry: Path, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    private, public = keys
    out = tmp_path / "signed"
    _create(registry, out, sign=private)
    assert "sign" in json.loads((out / "MANIFEST.json").read_text())["extras"]
    rep = verify(out, key=public)
    assert rep.ok and rep.signed_by and rep.signed_by.startswith("SHA256:")
    # Another key: refused.
    from rig.bundle.sign import keygen

    other_public, _ = keygen(tmp_path / "keys" / "other")
    rep = verify(out, key=other_public)
    assert not rep.ok and "does not hold" in rep.problems[0]
    # A file altered and the manifest re-hashed: the signature no longer holds.
    saved = (out / "MANIFEST.json").read_bytes()
    (out / "models.yaml").write_text("models: {}\n")
    rehash_raw(out)
    rep = verify(out, key=public)
    assert not rep.ok and "MANIFEST.json.sig: does not hold" in rep.problems[0]
    (out / "MANIFEST.json").write_bytes(saved)
    # The signature missing, or garbage.
    sig = out / "MANIFEST.json.sig"
    good = sig.read_bytes()
    sig.unlink()
    rep = verify(out, key=public)
    assert not rep.ok and f"{sig}: missing" in rep.problems[0]
    sig.write_text("rig-bundle-signature ed25519 !!!not base64\n")
    assert "not a rig bundle signature" in verify(out, key=public).problems[0]
    sig.write_bytes(good)
    assert verify(out, key=public).problems == []


def test_an_unsigned_bundle_with_a_key_is_refused(bundle: Path, keys: tuple[Path, Path]) -> None:
    rep = verify(bundle, key=keys[1])
    assert not rep.ok and "MANIFEST.json.sig: missing" in rep.problems[0]


def test_bad_keys_are_named(registry: Path, tmp_path: Path, bundle: Path) -> None:
    junk = tmp_path / "junk.key"
    junk.write_text("not a key")
    with pytest.raises(BundleError, match=f"--key {junk}: not a public key"):
        verify(bundle, key=junk)
    with pytest.raises(BundleError, match=f"--sign {junk}: not an unencrypted private key"):
        _create(registry, tmp_path / "b2", sign=junk)
    assert not (tmp_path / "b2").exists()  # refused before anything was copied


def test_a_key_of_a_type_rig_cannot_read_is_named(tmp_path: Path, bundle: Path, deadline: None) -> None:
    """A key type cryptography does not know raised UnsupportedAlgorithm, which was not caught: a traceback (issue
    37). A FIFO as --key is refused without waiting for a writer."""
    import base64
    import os
    import struct

    odd = tmp_path / "odd.pub"
    blob = struct.pack(">I", 7) + b"ssh-foo"
    odd.write_bytes(b"ssh-foo " + base64.b64encode(blob) + b" someone\n")
    with pytest.raises(BundleError, match=f"--key {odd}: a key type rig cannot read; bundle signatures are Ed25519"):
        verify(bundle, key=odd)
    code, text = _cli_verify(bundle, "--key", str(odd))
    assert code == 2 and "a key type rig cannot read" in text and "Traceback" not in text
    fifo = tmp_path / "fifo.pub"
    os.mkfifo(fifo)
    with pytest.raises(BundleError, match=f"--key {fifo}: is a FIFO"):
        verify(bundle, key=fifo)


def test_a_bundle_folder_taken_while_it_is_made_is_not_shared(
    registry: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `rig bundle create` into one folder both checked it empty, then filled it together; now a bundle is made
    beside its folder and renamed onto it, so the second is refused and the first's files are left alone."""
    import rig.bundle.make as make

    out = tmp_path / "b"
    real = make._fill

    def other_command_meanwhile(opts, stage):  # type: ignore[no-untyped-def]
        man = real(opts, stage)
        out.mkdir()
        (out / "theirs.txt").write_text("another command's bundle")
        return man

    monkeypatch.setattr(make, "_fill", other_command_meanwhile)
    with pytest.raises(BundleError, match=f"{out}: taken while the bundle was made"):
        create(CreateOptions(out=out, models=["tiny-q4"], benchmarks=["callnavi"], models_file=registry, wheels=False))
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]  # the half-made one removed


def test_cli_names_each_offender_and_the_manifest_problems(bundle: Path, tmp_path: Path) -> None:
    made = verify(bundle).bundle_id
    code, text = _cli_verify(bundle, "--expect", made)
    assert code == 0 and f"bundle {made} (the id expected)" in text
    outside = tmp_path / "outside.yaml"
    outside.write_bytes((bundle / "models.yaml").read_bytes())
    (bundle / "models.yaml").unlink()
    (bundle / "models.yaml").symlink_to(outside)
    (bundle / "data" / "etc").symlink_to("/etc")
    os.mkfifo(bundle / "README.md.new")
    code, text = _cli_verify(bundle, "--expect", "0" * 32)
    assert code == 2
    assert f"{bundle}/models.yaml: a symbolic link (to {outside})" in text
    assert f"{bundle}/data/etc: a symbolic link (to /etc)" in text
    assert f"{bundle}/README.md.new: a FIFO, not a regular file" in text
    assert f"--expect {'0' * 32}: this bundle is {made}" in text
    assert "does not verify (3 not a regular file" in text


def test_cli_keygen_create_sign_verify_key(registry: Path, tmp_path: Path) -> None:
    key = tmp_path / "k"
    res = CliRunner().invoke(app, ["bundle", "keygen", str(key)])
    assert res.exit_code == 0 and "SHA256:" in res.output
    out = tmp_path / "signed"
    res = create_bundle(registry, out, "--sign", str(key), models="tiny-q4")
    assert res.exit_code == 0, res.output
    made = json.loads((out / "MANIFEST.json").read_text())["bundle_id"]
    assert f"--expect {made} --key {key}.pub" in " ".join(res.output.split())
    code, text = _cli_verify(out, "--expect", made, "--key", f"{key}.pub")
    assert code == 0 and "signature by SHA256:" in text
    (out / "MANIFEST.json.sig").unlink()
    code, text = _cli_verify(out, "--key", f"{key}.pub")
    assert code == 2 and "MANIFEST.json.sig: missing" in text
    code, text = _cli_verify(out, "--key", str(tmp_path / "nokey.pub"))
    assert code == 2 and "nokey.pub: not found" in text


def test_a_manifest_from_a_newer_rig_is_refused_not_misjudged(bundle: Path) -> None:
    raw = json.loads((bundle / "MANIFEST.json").read_text())
    raw["format_version"] = 99
    (bundle / "MANIFEST.json").write_text(json.dumps(raw))
    code, text = _cli_verify(bundle)
    assert code == 2 and "MANIFEST.json: format_version: 99, made by a newer rig" in text


def test_a_corrupted_manifest_is_bad_input_never_a_crash(bundle: Path) -> None:
    """Bytes of MANIFEST.json cut, flipped, or values swapped for hostile ones: verify answers or raises BundleError."""
    import random

    man = bundle / "MANIFEST.json"
    good = man.read_bytes()
    raw = json.loads(good)
    hostile: list[bytes] = [
        good.replace(b'"created_at": ', b'"created_at": NaN, "x": ', 1),
        json.dumps(raw | {"files": None}).encode(),
        json.dumps(raw | {"files": [{"path": 7}]}).encode(),
        json.dumps(raw | {"files": [raw["files"][0] | {"size": 10**400}]}).encode(),
        json.dumps(raw | {"requires": "numpy"}).encode(),
        json.dumps(raw | {"extras": ["llamacpp] --log=x"]}).encode(),
        json.dumps(raw | {"data": {"callnavi": [[[[[[[[[[[]]]]]]]]]]]}}).encode(),
        b"\xff\xfe" + good,
        b"",
    ]
    rng = random.Random(30)
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] = rng.choice(b'{}[]",:0 \\x\xff')
        hostile.append(bytes(data[: rng.randint(0, len(data))] if rng.random() < 0.2 else data))
    for data in hostile:
        man.write_bytes(data)
        try:
            verify(bundle)
        except BundleError as e:
            assert str(e).startswith(str(man)), e
