"""The one table of rig's own engines (name -> "module:Class", the module that must import, the pip extra), and the
names installed packages add through the `rig.engines` entry point group (`rig.plugins`). Nothing is imported: the
registry (models.yaml validation reads `engine_names`) sits below the engines."""

from __future__ import annotations

from rig import plugins

ENGINES: dict[str, tuple[str, str, str]] = {
    # name: (module:Class, module that must import, pip extra)
    "llamacpp": ("rig.engines.llamacpp:LlamaCppEngine", "llama_cpp", "llamacpp"),
    "openai_compat": ("rig.engines.openai_compat:OpenAICompatEngine", "httpx", "openai"),
    "ollama": ("rig.engines.ollama:OllamaEngine", "httpx", "ollama"),
    "vllm": ("rig.engines.vllm:VllmEngine", "vllm", "vllm"),
}


def engine_plugins() -> dict[str, plugins.Plugin]:
    """Engines of installed packages (entry points of `rig.engines`) whose names are free; metadata only."""
    return plugins.discover(plugins.ENGINE_GROUP, tuple(ENGINES)).plugins


def engine_names() -> tuple[str, ...]:
    """rig's own engines, then those of installed packages: what a models.yaml entry may name."""
    return (*ENGINES, *engine_plugins())
