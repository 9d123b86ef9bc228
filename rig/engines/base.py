"""The engine interface: one async ``chat`` for every backend.

The runner keeps up to N episodes in flight; an engine declares how much concurrency it can use.
Engines that cannot batch (in-process llama.cpp) serialise behind their own lock, so the runner
needs no special case.
"""

from __future__ import annotations

import abc
from typing import Any

from pydantic import BaseModel

from rig.records import ChatRequest, Generation
from rig.registry import ModelSpec


class Capabilities(BaseModel):
    native_tools: bool = False
    grammar_kinds: tuple[str, ...] = ()  # Constraint kinds served natively
    continuous_batching: bool = False
    max_concurrency: int = 1


class EngineError(RuntimeError):
    """A problem with the engine itself (load failure, server down), as opposed to a bad model output."""


class Engine(abc.ABC):
    name: str = "engine"

    def __init__(self, spec: ModelSpec, weights: str, *, gpu: int | None = None, **options: Any) -> None:
        self.spec = spec
        self.weights = weights
        self.gpu = gpu
        self.options = options

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    async def load(self) -> None: ...

    @abc.abstractmethod
    async def chat(self, request: ChatRequest) -> Generation: ...

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, Any]:
        """What the engine found out at load (detected features, counters) for the run manifest."""
        return {}

    def versions(self) -> dict[str, str]:
        """Library versions that belong in the run manifest."""
        return {}

    def count_tokens(self, text: str) -> int | None:
        return None
