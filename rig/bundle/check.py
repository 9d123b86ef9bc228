"""`rig bundle verify`: the manifest checked as a whole (its id, --expect, a signature), then every file re-hashed.

Only regular files inside the bundle are read: a symlink (even one whose target has the right bytes), a FIFO, a
device or a socket is named as an offender and never opened, so nothing outside the bundle is read and nothing
hangs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rig.bundle.files import sha256_file
from rig.bundle.manifest import (
    MANIFEST,
    SIGNATURE,
    BundleError,
    BundleManifest,
    VerifyReport,
    file_kind,
    open_regular,
    parse_manifest,
    read_manifest_bytes,
)
from rig.progress import progress


def verify(bundle: Path, expect: str | None = None, key: Path | None = None) -> VerifyReport:
    """Name the missing, extra, altered and unsafe files, and what is wrong with the manifest as a whole: an id
    other than ``expect``, a signature that is missing or does not hold for the public ``key``."""
    return verified(bundle, expect, key)[0]


def verified(bundle: Path, expect: str | None = None, key: Path | None = None) -> tuple[VerifyReport, BundleManifest]:
    """``verify``, and the manifest it checked: what a caller acts on is what was verified, not a second read."""
    data = read_manifest_bytes(bundle)
    path = bundle / MANIFEST
    man, computed = parse_manifest(path, data)
    report = VerifyReport(bundle_id=computed, claimed_id=man.bundle_id, checked=0)
    if man.format_version >= 2 and man.bundle_id != computed:
        report.problems.append(
            f"{path}: bundle_id: claims {man.bundle_id}, but the manifest hashes to {computed} (edited since)"
        )
    if expect is not None and expect.strip().lower() != computed:
        report.problems.append(f"--expect {expect}: this bundle is {computed}, not the bundle that was made")
    if key is not None:
        from rig.bundle.sign import check_signature, load_public

        public = load_public(key)  # a key that cannot be read is bad input, not a bundle that fails
        try:
            report.signed_by = check_signature(bundle, data, public, key)
        except BundleError as e:
            report.problems.append(str(e))
    listed = {f.path: f for f in man.files}
    present, unsafe = scan(bundle)
    report.unsafe = [f"{rel}: {why}" for rel, why in sorted(unsafe.items())]
    report.missing = sorted(set(listed) - set(present) - set(unsafe))
    report.extra = sorted(set(present) - set(listed))
    common = sorted(set(listed) & set(present))
    with progress("verifying", sum(listed[r].size for r in common), unit="bytes", terminal_only=True) as bar:
        for rel in common:
            want = listed[rel]
            try:
                fd = open_regular(present[rel])  # no symlink swapped in since the scan, no FIFO
            except (OSError, BundleError) as e:
                report.unsafe.append(f"{rel}: {getattr(e, 'strerror', None) or e}")
                continue
            # A size change is an alteration without reading the file; the hash catches the rest.
            if os.fstat(fd).st_size != want.size:
                os.close(fd)
                report.altered.append(rel)
            elif sha256_file(fd, bar.advance) != want.sha256:
                report.altered.append(rel)
            report.checked += 1
    return report, man


def scan(root: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Regular files under ``root`` by relative path (the manifest and its signature left out), and every other
    entry with what it is. Symlinked folders are named, never entered."""
    present: dict[str, Path] = {}
    unsafe: dict[str, str] = {}

    def rel(p: str | Path) -> str:
        return Path(p).relative_to(root).as_posix()

    def unreadable(e: OSError) -> None:
        unsafe[rel(e.filename)] = f"cannot be read ({e.strerror})"

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        here = Path(dirpath)
        for name in list(dirnames):
            if (here / name).is_symlink():
                dirnames.remove(name)
                unsafe[rel(here / name)] = _link(here / name)
        dirnames.sort()
        for name in filenames:
            p = here / name
            r = rel(p)
            if r in (MANIFEST, SIGNATURE):
                continue
            try:
                mode = os.lstat(p).st_mode
            except OSError as e:
                unsafe[r] = f"cannot be read ({e.strerror})"
                continue
            if stat.S_ISREG(mode):
                present[r] = p
            else:
                unsafe[r] = _link(p) if stat.S_ISLNK(mode) else f"{file_kind(mode)}, not a regular file"
    return present, unsafe


def _link(p: Path) -> str:
    try:
        target = os.readlink(p)
    except OSError:
        target = "?"
    return f"a symbolic link (to {target}); a bundle holds regular files only"
