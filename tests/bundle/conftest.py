from __future__ import annotations

from pathlib import Path

import pytest

from tests.bundle.helpers import make_registry


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    """A models.yaml of three small models (GGUF variants, an HF folder, an Ollama tag) with their weight files."""
    return make_registry(tmp_path)
