"""`rig bundle`: everything a lab with no network needs, in one folder whose every file is hashed.

Layout of a bundle (paths in MANIFEST.json are relative to the bundle root, with forward slashes):

    wheels/            rig, the chosen extras' dependencies and the embedded-model package, for ``pip --no-index``
    wheels/src/        packages that ship only sources (llama-cpp-python) plus, in wheels/, their build requirements
    weights/<model>/   GGUF files and model folders named by the chosen models.yaml entries
    models.yaml        those entries, weights pointing inside the bundle (relative paths)
    data/<benchmark>/  each benchmark's data: its embedded default, or the lab's own folder or file (--data NAME=PATH)
    cache/packs/       built map packs, found read-only through RIG_PACKS=<bundle>/cache/packs (never rebuilt)
    README.md          the lab side's instructions
    MANIFEST.json      every other file with size and sha256; the bundle id is the hash of the manifest itself
    MANIFEST.json.sig  optional Ed25519 signature over MANIFEST.json's bytes (``create --sign``)

A run whose models.yaml sits beside a MANIFEST.json records the id computed from it (``bundle_id_for``).

Modules, one concern each: ``manifest`` (the records, reading MANIFEST.json, bundle ids), ``files`` (walk, hash,
copy), ``check`` (verify), ``weights``, ``data`` (benchmark data and map packs), ``wheels``, ``make`` (create),
``lab`` (install) and ``sign``.
"""

from rig.bundle.check import verify
from rig.bundle.data import parse_data_flags
from rig.bundle.files import sha256_file
from rig.bundle.lab import bundle_env, install
from rig.bundle.make import create
from rig.bundle.manifest import (
    BundleData,
    BundleError,
    BundleManifest,
    CreateOptions,
    VerifyReport,
    bundle_id_for,
    read_manifest,
)

__all__ = [
    "BundleData",
    "BundleError",
    "BundleManifest",
    "CreateOptions",
    "VerifyReport",
    "bundle_env",
    "bundle_id_for",
    "create",
    "install",
    "parse_data_flags",
    "read_manifest",
    "sha256_file",
    "verify",
]
