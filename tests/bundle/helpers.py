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
