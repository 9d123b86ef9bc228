"""`rig bundle verify`: every file re-hashed against MANIFEST.json."""

from __future__ import annotations

from pathlib import Path

from rig.bundle.files import _bar, _rel, _walk, sha256_file
from rig.bundle.manifest import MANIFEST, VerifyReport, read_manifest


def verify(bundle: Path) -> VerifyReport:
    """Re-hash every file; name the missing, extra and altered ones."""
    man = read_manifest(bundle)
    listed = {f.path: f for f in man.files}
    present = {_rel(p, bundle): p for p in _walk(bundle) if _rel(p, bundle) != MANIFEST}
    report = VerifyReport(bundle_id=man.bundle_id, checked=0)
    report.missing = sorted(set(listed) - set(present))
    report.extra = sorted(set(present) - set(listed))
    common = sorted(set(listed) & set(present))
    with _bar("verifying", sum(listed[r].size for r in common)) as advance:
        for rel in common:
            want, path = listed[rel], present[rel]
            # A size change is an alteration without reading the file; the hash catches the rest.
            if path.stat().st_size != want.size or sha256_file(path, advance) != want.sha256:
                report.altered.append(rel)
            report.checked += 1
    return report
