"""The llama.cpp engine makes every native call on one thread of its own.

llama.cpp's CPU backend runs on OpenMP, and libgomp keeps a team of worker threads per thread that starts parallel
work; with more of them than CPUs it stops spin-waiting at barriers and decoding slows down. `rig bench` set the
engine's calls on asyncio's default executor, whose second thread (made whenever another blocking call overlapped)
then decoded too: two teams. Checked here without a model: the native methods are replaced by recorders.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from rig.engines.base import Reply
from rig.engines.llamacpp import LlamaCppEngine
from rig.records import ChatRequest, Generation, Message
from rig.registry import ModelSpec, Weights


class _Llm:
    def __init__(self, seen: list[tuple[str, int]]) -> None:
        self.seen = seen

    def close(self) -> None:
        self.seen.append(("close", threading.get_ident()))


def _engine(seen: list[tuple[str, int]]) -> LlamaCppEngine:
    spec = ModelSpec(
        name="m", base="m", engine="llamacpp", weights=Weights(file="m.gguf"), quantization="q4_k_m", context_length=64
    )
    eng = LlamaCppEngine(spec, "m.gguf")

    def load() -> None:
        seen.append(("load", threading.get_ident()))
        eng.llm = _Llm(seen)

    def generate(request: ChatRequest, queued: float) -> Reply:
        time.sleep(0.05)
        seen.append(("generate", threading.get_ident()))
        return Reply(Generation(request_hash=request.digest(), text="ok", completion_tokens=1))

    eng._load_sync = load  # type: ignore[method-assign]
    eng._generate_sync = generate  # type: ignore[assignment,method-assign]
    return eng


def test_load_generate_and_close_run_on_one_thread_whatever_else_blocks() -> None:
    seen: list[tuple[str, int]] = []
    eng = _engine(seen)
    req = ChatRequest(messages=[Message(role="user", content="hi")])

    async def run() -> Any:
        await eng.load()
        for _ in range(3):
            # other blocking work on the default executor while the engine generates (a store write, a tool)
            await asyncio.gather(eng.chat(req), asyncio.to_thread(time.sleep, 0.1), asyncio.to_thread(time.sleep, 0.1))
        await eng.chat(req)
        busy = asyncio.create_task(eng.chat(req))
        await asyncio.sleep(0)
        await eng.close()  # queued behind the call in flight: the model is never closed under a decoding thread
        return await busy

    gen = asyncio.run(run())
    assert gen.text == "ok"
    assert [k for k, _ in seen] == ["load", *["generate"] * 5, "close"]
    threads = {t for _, t in seen}
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert eng._native_thread is None  # shut down with the engine: its thread and OpenMP team go


def test_a_closed_engine_loads_again_on_a_new_thread() -> None:
    seen: list[tuple[str, int]] = []
    eng = _engine(seen)
    asyncio.run(eng.load())
    asyncio.run(eng.close())
    asyncio.run(eng.load())  # each test of the model module drives the engine from its own event loop
    asyncio.run(eng.close())
    assert [k for k, _ in seen] == ["load", "close", "load", "close"]
