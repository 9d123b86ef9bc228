"""A fake engine for runner unit tests only (engines themselves are tested against real instances)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rig.engines.base import Capabilities, Engine
from rig.records import ChatRequest, Generation, Timings
from rig.registry import ModelSpec, Weights


def fake_spec() -> ModelSpec:
    return ModelSpec(
        name="fake", base="fake", engine="llamacpp", weights=Weights(file="x"), quantization="none", context_length=1024
    )


class FakeEngine(Engine):
    def __init__(
        self,
        answer: Callable[[ChatRequest], str],
        delay: float = 0.0,
        concurrency: int = 1,
        fail_on: str | None = None,
        finish: Callable[[str], str | None] | None = None,
    ) -> None:
        super().__init__(fake_spec(), "x")
        self.answer, self.delay, self.concurrency, self.fail_on = answer, delay, concurrency, fail_on
        self.finish = finish  # answer text -> finish_reason (None: the engine reports none)
        self.calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(max_concurrency=self.concurrency, continuous_batching=self.concurrency > 1)

    async def load(self) -> None:
        return None

    async def chat(self, request: ChatRequest) -> Generation:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            prompt = request.messages[-1].content
            self.calls.append(prompt)
            if self.fail_on and self.fail_on in prompt:
                raise RuntimeError("engine exploded")
            text = self.answer(request)
            return Generation(
                request_hash=request.digest(),
                text=text,
                prompt_tokens=len(prompt.split()),
                completion_tokens=len(text.split()),
                timings=Timings(e2e_s=self.delay, ttft_s=self.delay),
                finish_reason=self.finish(text) if self.finish else None,
            )
        finally:
            self.in_flight -= 1
