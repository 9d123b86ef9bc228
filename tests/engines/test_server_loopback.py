"""LocalServer refuses a server that listens beyond loopback (issue 18, item 7)."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from rig.engines.base import EngineError
from rig.engines.server import LocalServer, free_port, listen_addresses


def _http_server(bind: str, port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", "--bind", bind, "--directory", "/", str(port)]


def test_server_binding_all_interfaces_is_stopped_and_refused() -> None:
    port = free_port()
    srv = LocalServer(_http_server("0.0.0.0", port), port=port, ready_path="/", ready_timeout_s=30, stop_grace_s=2)
    with pytest.raises(EngineError, match=r"listens on 0\.0\.0\.0 port .* not only on loopback"):
        asyncio.run(srv.start())
    assert not srv.running()
    assert listen_addresses(port) == []  # it was stopped, not left listening


def test_server_binding_all_interfaces_is_refused_before_it_is_ready() -> None:
    """A server that listens on 0.0.0.0 but never answers its ready path (a model still loading) is stopped as soon
    as it listens, not left exposed until the readiness timeout."""
    port = free_port()
    srv = LocalServer(
        _http_server("0.0.0.0", port), port=port, ready_path="/no-such-file", ready_timeout_s=60, stop_grace_s=2
    )
    t0 = time.monotonic()
    with pytest.raises(EngineError, match=r"listens on 0\.0\.0\.0 port"):
        asyncio.run(srv.start())
    assert time.monotonic() - t0 < 30  # refused at the first poll after it bound, long before the 60 s timeout
    assert not srv.running() and listen_addresses(port) == []


def test_server_binding_loopback_is_accepted() -> None:
    port = free_port()
    srv = LocalServer(_http_server("127.0.0.1", port), port=port, ready_path="/", ready_timeout_s=30, stop_grace_s=2)

    async def go() -> None:
        await srv.start()
        try:
            assert srv.running()
            assert listen_addresses(port) == ["127.0.0.1"]
        finally:
            await srv.stop()

    asyncio.run(go())


def test_non_loopback_host_is_refused() -> None:
    with pytest.raises(EngineError, match="not loopback"):
        LocalServer(["x"], host="0.0.0.0", port=1)
