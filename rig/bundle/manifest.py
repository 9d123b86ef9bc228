"""MANIFEST.json: the records a bundle is described by, and reading them back."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from rig.records import write_record

MANIFEST = "MANIFEST.json"
BUNDLE_FORMAT = 1
# What each part of a bundle is for (MANIFEST.json's `parts`); a file belongs to its longest matching prefix.
_PURPOSE = {
    "wheels": "Python wheels for `pip install --no-index --find-links wheels` (rig, its extras, model packages)",
    "wheels/src": "source archives of packages with no wheel, compiled offline from wheels/ build requirements",
    "weights": "model weights named by models.yaml",
    "models.yaml": "model registry whose weights point inside the bundle (RIG_MODELS)",
    "data": "benchmark data for `rig bench --data` and doctor: embedded defaults (also inside the rig wheel) and the "
    "lab's own (MANIFEST.json's `data` says which)",
    "cache": "built map packs, found by rig when RIG_PACKS points at cache/packs (read only)",
    "README.md": "instructions for the lab side",
}


class BundleError(Exception):
    """Bad input or an incomplete bundle; str() names the entry, file or field."""


class BundleFile(BaseModel):
    path: str  # relative to the bundle root, forward slashes
    size: int
    sha256: str
    part: str  # key of BundleManifest.parts


class WheelSource(BaseModel):
    """How a source-only package travels."""

    package: str
    sdist: str  # path in the bundle
    build_requires: list[str]
    built_wheel: str | None = None  # path in the bundle; None: the lab compiles the sdist
    note: str


class BundleData(BaseModel):
    """Where one benchmark's data lies in the bundle, and whose it is."""

    path: str  # relative to the bundle root: data/<benchmark>, or data/<benchmark>/<file> for a single file
    origin: Literal["embedded", "user"]  # rig's shipped default, or the folder or file given with --data


class BundleManifest(BaseModel):
    format_version: int = BUNDLE_FORMAT
    bundle_id: str
    created_at: float
    rig_version: str
    rig_commit: str | None
    python: str  # target interpreter, "3.11"
    platform: str | None  # target pip platform tag; None: the machine that made the bundle
    made_on: str  # platform of the machine that made it
    models: list[str]
    benchmarks: list[str]
    extras: list[str]
    requires: list[str] = Field(default_factory=list)  # pins installed beside rig[extras], e.g. a CPU torch
    not_copied: list[str] = Field(default_factory=list)  # what the lab must provide itself, by name
    sources: list[WheelSource] = Field(default_factory=list)
    data: dict[str, BundleData] = Field(default_factory=dict)  # benchmark -> its data; empty in bundles made before
    parts: dict[str, str] = Field(default_factory=dict)  # part -> what it is for
    files: list[BundleFile]

    def write(self, root: Path) -> None:
        write_record(root / MANIFEST, self)


class CreateOptions(BaseModel):
    out: Path
    models: list[str]
    benchmarks: list[str]
    extras: list[str] = Field(default_factory=lambda: ["llamacpp"])
    # Extra requirements downloaded and installed beside rig[extras]: a pin such as torch==2.13.0 (a CPU build)
    # keeps pip from resolving the mobility extra's torch to a CUDA build of several GB.
    requires: list[str] = Field(default_factory=list)
    python: str | None = None  # default: this interpreter
    platform: str | None = None  # default: this machine
    models_file: Path | None = None
    wheels: bool = True  # False: no pip work (tests; a lab that already has the packages)
    build: bool = True  # build source-only packages here when the target is this machine
    find_links: list[Path] = Field(default_factory=list)  # local wheel folders pip may use
    no_index: bool = False  # pip uses only find_links
    maps: bool = True  # include the built map packs the chosen benchmarks use
    data: dict[str, Path] = Field(default_factory=dict)  # benchmark -> the lab's own data, instead of the embedded


class VerifyReport(BaseModel):
    bundle_id: str
    checked: int
    missing: list[str] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    altered: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.altered)


def _part_of(rel: str) -> str:
    for key in sorted(_PURPOSE, key=len, reverse=True):
        if rel == key or rel.startswith(key + "/"):
            return key
    return "other"


def bundle_id_of(files: Iterable[BundleFile]) -> str:
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f"{f.path}\0{f.size}\0{f.sha256}\n".encode())
    return h.hexdigest()[:16]


def read_manifest(bundle: Path) -> BundleManifest:
    path = bundle / MANIFEST
    try:
        return BundleManifest.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: not found (is {bundle} a bundle made by `rig bundle create`?)") from None
    except ValidationError as e:
        first = e.errors()[0]
        raise BundleError(f"{path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    except ValueError as e:
        raise BundleError(f"{path}: not valid JSON: {e}") from None


def bundle_id_for(models_file: str | os.PathLike[str]) -> str | None:
    """The id of the bundle whose models.yaml this is, else None (a run records it to trace its weights and data)."""
    path = Path(models_file).resolve().parent / MANIFEST
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text()).get("bundle_id")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None
