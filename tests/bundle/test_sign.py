"""`rig bundle keygen`: a key pair or nothing (issue 51: a long name left a private key without its public one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rig.cli import app

pytest.importorskip("cryptography")


def test_a_key_whose_public_name_cannot_be_made_leaves_no_private_key(tmp_path: Path) -> None:
    private = tmp_path / ("k" * 252)  # fits a name; KEY.pub (256 bytes) does not
    r = CliRunner().invoke(app, ["bundle", "keygen", str(private)])
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "cannot be written (File name too long); no key was kept" in said, r.output
    assert list(tmp_path.iterdir()) == []


def test_a_key_pair_is_made_once(tmp_path: Path) -> None:
    private = tmp_path / "bundle-key"
    r = CliRunner().invoke(app, ["bundle", "keygen", str(private)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle-key", "bundle-key.pub"]
    assert (private.stat().st_mode & 0o777) == 0o600
    r = CliRunner().invoke(app, ["bundle", "keygen", str(private)])
    assert r.exit_code == 2 and "exists; choose a new name" in r.output
