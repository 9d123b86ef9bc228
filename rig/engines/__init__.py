"""Engines by name, imported lazily, as the one registry (`rig.plugins`) lists them: rig's own and those of
installed packages (`rig.engines` entry points)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rig import plugins
from rig.plugins import ENGINES, MissingExtra

if TYPE_CHECKING:
    from rig.engines.base import Engine
    from rig.registry import ModelSpec

# ENGINES (rig's own entries) and MissingExtra are the registry's, re-exported
__all__ = ["ENGINES", "MissingExtra", "create_engine", "engine_class", "engine_names"]


def engine_names() -> tuple[str, ...]:
    """rig's own engines, then those of installed packages: what a models.yaml entry may name."""
    return plugins.names(plugins.ENGINE_GROUP)


def engine_class(name: str) -> type[Engine]:
    """The engine's class, imported; a missing backend is `MissingExtra`, a plugin that cannot be used a
    `plugins.PluginError` naming its distribution."""
    entry = plugins.table(plugins.ENGINE_GROUP).get(name)
    if entry is None:
        raise KeyError(f"engine {name!r} is not available in this version of rig; known: {', '.join(engine_names())}")
    cls: type[Engine] = plugins.load(entry)
    return cls


def create_engine(spec: ModelSpec, weights: str, *, gpu: int | None = None) -> Engine:
    return engine_class(spec.engine)(spec, weights, gpu=gpu)
