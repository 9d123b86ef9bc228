"""MANIFEST.json: the records a bundle is described by, and reading them back."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from rig.records import write_record

MANIFEST = "MANIFEST.json"
SIGNATURE = "MANIFEST.json.sig"  # beside the manifest, never listed in it (it signs the manifest's bytes)
# 2: bundle_id is the hash of the manifest itself (manifest_id); 1: it was the hash of the file list only.
BUNDLE_FORMAT = 2
EXTRA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# What each part of a bundle is for (MANIFEST.json's `parts`); a file belongs to its longest matching prefix.
PART_PURPOSE = {
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

    # What the lab's pip is handed comes from here: an entry that is not a plain requirement could be an option
    # (`--log=FILE`) or a URL outside the bundle.
    @field_validator("requires")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        for i, req in enumerate(value):
            if problem := requirement_problem(req):
                raise ValueError(f"entry {i} {req!r}: {problem}")
        return value

    @field_validator("extras")
    @classmethod
    def _extras(cls, value: list[str]) -> list[str]:
        for i, extra in enumerate(value):
            if not EXTRA_NAME.fullmatch(extra):
                raise ValueError(f"entry {i} {extra!r}: not an extra's name (letters, digits, '.', '_', '-')")
        return value

    @field_validator("files")
    @classmethod
    def _paths(cls, value: list[BundleFile]) -> list[BundleFile]:
        seen: set[str] = set()
        for i, f in enumerate(value):
            if problem := _path_problem(f.path):
                raise ValueError(f"entry {i} {f.path!r}: {problem}")
            if f.path in seen:
                raise ValueError(f"entry {i} {f.path!r}: listed twice")
            seen.add(f.path)
        return value

    def write(self, root: Path) -> None:
        write_record(root / MANIFEST, self)

    def stamped(self) -> BundleManifest:
        """This manifest with its bundle_id set to the hash of everything else in it (as written and read back)."""
        raw = json.loads(self.model_dump_json())
        return self.model_copy(update={"bundle_id": manifest_id(raw)})


def requirement_problem(req: str) -> str | None:
    """Why ``req`` is not a requirement specifier pip may be given from a bundle, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    if req.lstrip().startswith("-"):
        return "an option, not a requirement"
    try:
        parsed = Requirement(req)
    except InvalidRequirement as e:
        return f"not a requirement specifier ({e})"
    if parsed.url:
        return "a URL requirement; a bundle installs from its own wheels only"
    return None


def _path_problem(rel: str) -> str | None:
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or "\\" in rel or "\0" in rel:
        return "not a relative path"
    if any(part in ("", ".", "..") for part in rel.split("/")):
        return "not a normalised path inside the bundle"
    if rel in (MANIFEST, SIGNATURE):
        return "the manifest cannot list itself"
    return None


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
    sign: Path | None = None  # an Ed25519 private key: MANIFEST.json.sig is written with it


class VerifyReport(BaseModel):
    bundle_id: str  # computed from the manifest read (manifest_id), never the id it claims
    claimed_id: str  # MANIFEST.json's own bundle_id
    checked: int
    missing: list[str] = Field(default_factory=list)
    extra: list[str] = Field(default_factory=list)
    altered: list[str] = Field(default_factory=list)
    # Not a regular file inside the bundle (symlink, FIFO, device, socket, unreadable): "path: why".
    unsafe: list[str] = Field(default_factory=list)
    # The manifest as a whole: a claimed id that is not its hash, an id other than --expect, a bad signature.
    problems: list[str] = Field(default_factory=list)
    signed_by: str | None = None  # the public key's fingerprint when a signature was checked and holds

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.altered or self.unsafe or self.problems)

    def summary(self) -> str:
        counts = [
            f"{len(v)} {k}"
            for k, v in (("missing", self.missing), ("extra", self.extra), ("altered", self.altered))
            if v
        ]
        if self.unsafe:
            counts.append(f"{len(self.unsafe)} not a regular file")
        return "; ".join(([", ".join(counts) + " file(s)"] if counts else []) + self.problems)


def part_of(rel: str) -> str:
    for key in sorted(PART_PURPOSE, key=len, reverse=True):
        if rel == key or rel.startswith(key + "/"):
            return key
    return "other"


def manifest_id(raw: dict[str, Any]) -> str:
    """The bundle id: sha256 over the manifest as read (canonical JSON, its own bundle_id left out), so any change
    to a file's hash, a requirement or an extra gives another id. 128 bits: carried by hand, compared exactly."""
    body = {k: v for k, v in raw.items() if k != "bundle_id"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_MAX_MANIFEST = 256 << 20  # far above a manifest of a million files


def file_kind(mode: int) -> str:
    for test, what in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def open_regular(path: Path) -> int:
    """A file descriptor on ``path`` if it is a regular file, refusing symlinks, FIFOs (no hang waiting for a writer)
    and devices; OSError (ELOOP for a symlink) or BundleError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BundleError(f"{path}: {file_kind(mode)}, not a regular file")
    return fd


def read_manifest_bytes(bundle: Path) -> bytes:
    """MANIFEST.json's bytes, read only if it is a regular file of a sane size inside a bundle folder."""
    path = bundle / MANIFEST
    try:
        if not bundle.is_dir():
            what = "does not exist" if not bundle.exists() else "is not a folder"
            raise BundleError(f"{bundle}: {what} (a bundle is the folder made by `rig bundle create`)")
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"{path}: {file_kind(st.st_mode)}, not a regular file")
        if st.st_size > _MAX_MANIFEST:
            raise BundleError(f"{path}: {st.st_size} bytes, more than a manifest ever holds")
        fd = open_regular(path)
        with os.fdopen(fd, "rb") as f:
            return f.read(_MAX_MANIFEST + 1)
    except FileNotFoundError:
        raise BundleError(f"{path}: not found (is {bundle} a bundle made by `rig bundle create`?)") from None
    except OSError as e:
        raise BundleError(f"{path}: cannot be read ({e.strerror})") from None


def parse_manifest(path: Path, data: bytes) -> tuple[BundleManifest, str]:
    """The manifest and the bundle id computed from these bytes (not the id they claim)."""
    try:
        raw = json.loads(data)
    except RecursionError:
        raise BundleError(f"{path}: nested too deeply to be a bundle manifest") from None
    except ValueError as e:
        raise BundleError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise BundleError(f"{path}: (top level): a JSON object is expected, found {type(raw).__name__}")
    version = raw.get("format_version", 1)
    if isinstance(version, int) and version > BUNDLE_FORMAT:
        # A newer rig may hash its manifest differently: no id could be checked.
        raise BundleError(
            f"{path}: format_version: {version}, made by a newer rig (this one reads up to {BUNDLE_FORMAT}); "
            "verify it with that rig"
        )
    try:
        # strict, as every file rig reads (rig.inputs): a format_version "99" or true is refused, not coerced
        man = BundleManifest.model_validate(raw, strict=True)
        return man, manifest_id(raw)
    except RecursionError:
        raise BundleError(f"{path}: nested too deeply to be a bundle manifest") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise BundleError(f"{path}: {where}: {first['msg']}") from None
    except ValueError as e:  # a NaN or infinity has no canonical JSON
        raise BundleError(f"{path}: {e}") from None


def read_manifest(bundle: Path) -> BundleManifest:
    return parse_manifest(bundle / MANIFEST, read_manifest_bytes(bundle))[0]


def bundle_id_for(models_file: str | os.PathLike[str]) -> str | None:
    """The id of the bundle whose models.yaml this is, computed from the MANIFEST.json beside it (a run records it to
    trace its weights and data), else None; a MANIFEST.json there that is no readable bundle manifest is a
    BundleError naming it, not a run without a bundle id."""
    bundle = Path(models_file).resolve().parent
    if not os.path.lexists(bundle / MANIFEST):
        return None
    return parse_manifest(bundle / MANIFEST, read_manifest_bytes(bundle))[1]
