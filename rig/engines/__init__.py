"""Engine registry: name -> "module:Class" plus the extra that provides it; imported lazily.

The one table of engines: models.yaml validation (rig.registry) reads its keys, so a new engine is its file plus
one line here. Nothing from rig is imported at module level (the registry sits below the engines)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rig.engines.base import Engine
    from rig.registry import ModelSpec

ENGINES: dict[str, tuple[str, str, str]] = {
    # name: (module:Class, module that must import, pip extra)
    "llamacpp": ("rig.engines.llamacpp:LlamaCppEngine", "llama_cpp", "llamacpp"),
    "openai_compat": ("rig.engines.openai_compat:OpenAICompatEngine", "httpx", "openai"),
    "ollama": ("rig.engines.ollama:OllamaEngine", "httpx", "ollama"),
    "vllm": ("rig.engines.vllm:VllmEngine", "vllm", "vllm"),
}


class MissingExtra(ImportError):
    pass


def engine_class(name: str) -> type[Engine]:
    if name not in ENGINES:
        raise KeyError(f"engine {name!r} is not available in this version of rig; built: {', '.join(ENGINES)}")
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
