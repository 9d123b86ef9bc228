"""Ed25519 signatures over MANIFEST.json's bytes (the `sign` extra: the cryptography package).

The maker signs with a private key (an OpenSSH ``ssh-keygen -t ed25519`` key or a PEM made by ``keygen``) into
MANIFEST.json.sig; the lab checks it against the public key (an OpenSSH ``ssh-ed25519 ...`` line or PEM) it received
separately. The manifest lists every file's sha256, so a signature that holds covers every byte of the bundle.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

from rig.bundle.manifest import MANIFEST, SIGNATURE, BundleError, read_manifest_bytes
from rig.inputs import InputError, read_bytes
from rig.records import write_atomic

_HEADER = "rig-bundle-signature ed25519"
_MAX_KEY = 64 << 10
_UNSUPPORTED = "a key type rig cannot read; bundle signatures are Ed25519 (ssh-keygen -t ed25519, or rig bundle keygen)"


def _crypto(flag: str) -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ModuleNotFoundError:
        raise BundleError(f"{flag}: signatures need the cryptography package (pip install 'rig[sign]')") from None
    return serialization


def _read_small(path: Path, flag: str) -> bytes:
    if not os.path.lexists(path):
        raise BundleError(f"{flag} {path}: not found")
    try:
        return read_bytes(path, max_bytes=_MAX_KEY, follow_symlinks=False)
    except InputError as e:
        raise BundleError(f"{flag} {e}") from None


def fingerprint(public: Any) -> str:
    """OpenSSH's fingerprint of a public key (what `ssh-keygen -l` prints), to tell keys apart in messages."""
    serialization = _crypto("--key")
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def keygen(private: Path) -> tuple[Path, str]:
    """A new Ed25519 key pair: ``private`` (PEM, mode 0600) and ``private.pub`` (OpenSSH line); refuses to overwrite."""
    serialization = _crypto("keygen")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public_path = private.with_name(private.name + ".pub")
    for p in (private, public_path):
        if os.path.lexists(p):
            raise BundleError(f"{p}: exists; choose a new name (a key is never overwritten)")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    made: list[Path] = []
    try:
        for path, data, mode in ((private, pem, 0o600), (public_path, pub + b" rig-bundle\n", 0o644)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            made.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    except OSError as e:
        for path in made:  # a pair or nothing: a private key without its public one is of no use
            with contextlib.suppress(OSError):
                path.unlink()
        raise BundleError(f"{e.filename or private}: cannot be written ({e.strerror}); no key was kept") from None
    return public_path, fingerprint(key.public_key())


def load_private(path: Path) -> Any:
    serialization = _crypto("--sign")
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = _read_small(path, "--sign")
    try:
        if data.startswith(b"-----BEGIN OPENSSH PRIVATE KEY"):
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except UnsupportedAlgorithm as e:
        raise BundleError(f"--sign {path}: {_UNSUPPORTED} ({e})") from None
    except (ValueError, TypeError) as e:
        raise BundleError(f"--sign {path}: not an unencrypted private key ({e})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError(f"--sign {path}: not an Ed25519 key")
    return key


def load_public(path: Path) -> Any:
    serialization = _crypto("--key")
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _read_small(path, "--key")
    try:
        if data.lstrip().startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(b" ".join(data.split()[:2]))
        else:
            key = serialization.load_pem_public_key(data)
    except UnsupportedAlgorithm as e:
        raise BundleError(f"--key {path}: {_UNSUPPORTED} ({e})") from None
    except (ValueError, TypeError, IndexError) as e:
        raise BundleError(f"--key {path}: not a public key ({e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise BundleError(f"--key {path}: not an Ed25519 public key")
    return key


def sign_manifest(bundle: Path, private: Path) -> str:
    """Sign the bundle's MANIFEST.json as it is on disk into MANIFEST.json.sig; returns the key's fingerprint."""
    key = load_private(private)
    data = read_manifest_bytes(bundle)
    text = f"{_HEADER} {base64.b64encode(key.sign(data)).decode()}\n"
    write_atomic(bundle / SIGNATURE, text)
    return fingerprint(key.public_key())


def check_signature(bundle: Path, manifest: bytes, key: Any, public: Path) -> str:
    """The fingerprint of ``key`` (read from ``public``) if MANIFEST.json.sig is its signature over exactly these
    manifest bytes; BundleError naming what is wrong otherwise."""
    from cryptography.exceptions import InvalidSignature

    path = bundle / SIGNATURE
    if not os.path.lexists(path):
        raise BundleError(f"{path}: missing; --key asks for a signed bundle (made with `rig bundle create --sign`)")
    try:
        text = _read_small(path, "signature").decode("ascii").strip()
    except UnicodeDecodeError:
        text = ""
    head, _, b64 = text.rpartition(" ")
    try:
        if head != _HEADER:
            raise ValueError(text[:40])
        signature = base64.b64decode(b64, validate=True)
    except ValueError:
        raise BundleError(f"{path}: not a rig bundle signature (expected '{_HEADER} BASE64')") from None
    try:
        key.verify(signature, manifest)
    except InvalidSignature:
        raise BundleError(
            f"{path}: does not hold for {MANIFEST} and key {fingerprint(key)} ({public}): the manifest was changed "
            "after it was signed, or signed with another key"
        ) from None
    return fingerprint(key)
