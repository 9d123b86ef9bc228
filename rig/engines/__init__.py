"""Engines by name, imported lazily: rig's own from the table in `rig.engines.table` (a new engine is its file plus
one line there), and those of installed packages (`rig.engines` entry points, `rig.plugins`)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from rig import plugins
from rig.engines.table import ENGINES, engine_names, engine_plugins

if TYPE_CHECKING:
    from rig.engines.base import Engine
    from rig.registry import ModelSpec


class MissingExtra(ImportError):
    pass


def engine_class(name: str) -> type[Engine]:
    """The engine's class, imported; a missing backend is `MissingExtra`, a plugin that cannot be used a
    `plugins.PluginError` naming its distribution."""
    if name not in ENGINES:
        found = engine_plugins()
        if name in found:
            from rig.engines.base import Engine

            plugin: type[Engine] = plugins.load(found[name], Engine)
            return plugin
        raise KeyError(f"engine {name!r} is not available in this version of rig; known: {', '.join(engine_names())}")
    target, needs, extra = ENGINES[name]
    # Look the module up without importing it: importing vLLM initialises CUDA, after which --gpu can no longer
    # choose the device (CUDA_VISIBLE_DEVICES is read once, at import).
    if importlib.util.find_spec(needs) is None:
        raise MissingExtra(
            f"engine {name!r} needs the Python module {needs!r}, which is not installed. "
            f"Install it with: pip install 'rig[{extra}]'"
        )
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def create_engine(spec: ModelSpec, weights: str, *, gpu: int | None = None) -> Engine:
    return engine_class(spec.engine)(spec, weights, gpu=gpu)
