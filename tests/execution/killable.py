"""`rig bench` in a subprocess that a test kills: ``python -m tests.execution.killable ARGS...`` runs the CLI with ARGS.

Environment switches (all optional):
- ``KILLABLE_FAKE=1``: a fake engine instead of the registry's, whose load and calls run in worker threads like
  llama.cpp's; closing it while a call is still in its thread aborts the process (what llama.cpp does, a segfault).
- ``KILLABLE_EVENTS=path``: append one line per event (``load``, ``loaded``, ``call``, ``commit``) to that file, so
  the test knows when to kill; with the real engine only ``load``, ``loaded`` and ``commit``.
- ``KILLABLE_DELAY=s``: seconds each fake engine call takes (default 0.15).
- ``KILLABLE_COMMIT_DELAY=s``: sleep inside each store transaction, before COMMIT, to be killed mid-commit.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import threading
import time
from typing import Any

from rig.engines.base import Capabilities, Engine
from rig.records import ChatRequest, Generation, Timings

EVENTS = os.environ.get("KILLABLE_EVENTS")


def event(name: str) -> None:
    if EVENTS:
        with open(EVENTS, "a") as f:
            f.write(name + "\n")


class ThreadedFakeEngine(Engine):
    """Answers a deterministic function of the prompt after ``delay`` seconds spent in a worker thread."""

    def __init__(self, spec: Any, weights: str) -> None:
        super().__init__(spec, weights)
        self.delay = float(os.environ.get("KILLABLE_DELAY", "0.15"))
        self.busy = 0
        self.lock = threading.Lock()

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(max_concurrency=1)

    def _decode(self, prompt: str) -> str:
        with self.lock:
            self.busy += 1
        try:
            time.sleep(self.delay)
            return json.dumps([hashlib.sha256(prompt.encode()).hexdigest()[:8]])
        finally:
            with self.lock:
                self.busy -= 1

    async def load(self) -> None:
        event("load")
        await asyncio.to_thread(time.sleep, 0.5)
        event("loaded")

    async def chat(self, request: ChatRequest) -> Generation:
        event("call")
        prompt = request.messages[-1].content
        text = await asyncio.to_thread(self._decode, prompt)
        return Generation(
            request_hash=request.digest(),
            text=text,
            prompt_tokens=len(prompt.split()),
            completion_tokens=1,
            finish_reason="stop",
            timings=Timings(e2e_s=self.delay),
        )

    async def close(self) -> None:
        if self.busy:
            sys.stderr.write("engine closed while a call was in its thread\n")
            sys.stderr.flush()
            os.abort()


class _SlowCommit:
    """A connection whose COMMIT waits first, so a kill can land between the inserts and the commit."""

    def __init__(self, conn: Any, delay: float) -> None:
        self._conn, self._delay = conn, delay

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT":
            event("commit")
            time.sleep(self._delay)
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def main() -> None:
    from rig import cli
    from rig.execution import bench

    if os.environ.get("KILLABLE_FAKE") == "1":
        bench.create_engine = lambda spec, weights, gpu=None: ThreadedFakeEngine(spec, weights)  # type: ignore[assignment]
    elif EVENTS:
        real = bench.create_engine

        def create_engine(spec: Any, weights: str, gpu: Any = None) -> Engine:
            engine = real(spec, weights, gpu=gpu)
            load = engine.load

            async def evented_load() -> None:  # the real engine's load, announced so a test can kill inside it
                event("load")
                await load()
                event("loaded")

            engine.load = evented_load  # type: ignore[method-assign]
            return engine

        bench.create_engine = create_engine  # type: ignore[assignment]
    delay = float(os.environ.get("KILLABLE_COMMIT_DELAY", "0"))
    if delay:
        base = bench.Store

        class SlowStore(base):  # type: ignore[valid-type, misc]
            def __init__(self, path: Any, **kw: Any) -> None:
                super().__init__(path, **kw)
                self.conn = _SlowCommit(self.conn, delay)  # type: ignore[assignment]

        bench.Store = SlowStore  # type: ignore[misc]
    sys.argv = ["rig", *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    main()
