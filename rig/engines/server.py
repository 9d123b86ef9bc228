"""Local inference servers: start one on a free loopback port, wait until it answers, stop it.

Also the HTTP plumbing the server-backed engines share: a loopback-only URL check (the offline guard would refuse
anything else at connect time; refusing at construction gives a message that says why), the server's own words for
an HTTP error, and an httpx client per event loop whose ``call`` runs one request in a concurrency slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from rig.engines.base import EngineError, Reply
from rig.records import ChatRequest, Generation, Timings


def is_loopback_host(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0]).is_loopback
    except ValueError:
        return False


def loopback_url(url: str) -> str:
    """``url`` without a trailing slash; ValueError unless it is http(s) on a loopback host (an engine_args
    validator, so the message is then prefixed with the models.yaml entry and field)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// URL (e.g. http://127.0.0.1:8000)")
    if not is_loopback_host(parts.hostname):
        raise ValueError(
            f"{url!r} is not on loopback. rig runs offline and its offline guard refuses "
            "non-loopback connections; run the server on this machine (127.0.0.1, ::1 or localhost)"
        )
    return url.rstrip("/")


def http_error_message(resp: httpx.Response) -> str:
    """The server's own words for an HTTP error (OpenAI, FastAPI and Ollama shapes), shortened."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:500] or resp.reason_phrase
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body))
        if isinstance(err, dict):
            err = err.get("message", err)
        return (err if isinstance(err, str) else json.dumps(err))[:500]
    return json.dumps(body)[:500]


def free_port(host: str = "127.0.0.1") -> int:
    # The port is free now; the server binds it a moment later. A lost race shows up as an early exit.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ClientPerLoop:
    """An ``httpx.AsyncClient`` and a concurrency semaphore for the running event loop.

    Pooled connections and asyncio primitives belong to the loop that created them; the runner uses one loop, but
    callers that ``asyncio.run`` each call (tests, scripts) would otherwise hit "attached to a different loop".
    """

    def __init__(self, limit: int, **client_kwargs: object) -> None:
        self.limit = limit
        self._kwargs = client_kwargs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._sem: asyncio.Semaphore | None = None

    def _current(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop or self._client is None:
            self._loop = loop
            self._client = httpx.AsyncClient(**self._kwargs)  # type: ignore[arg-type]
            self._sem = asyncio.Semaphore(self.limit)

    @property
    def client(self) -> httpx.AsyncClient:
        self._current()
        assert self._client is not None
        return self._client

    @property
    def semaphore(self) -> asyncio.Semaphore:
        self._current()
        assert self._sem is not None
        return self._sem

    @contextlib.asynccontextmanager
    async def call(self, request: ChatRequest) -> AsyncIterator[tuple[Reply, float]]:
        """One request in a concurrency slot: its ``Reply`` (the time queued for the slot recorded) and the
        ``perf_counter`` at which the slot came free. An exception inside becomes the generation's error: a failed
        call is a recorded result, not a crashed run."""
        queued = time.perf_counter()
        async with self.semaphore:
            t0 = time.perf_counter()
            reply = Reply(Generation(request_hash=request.digest(), timings=Timings(queue_s=t0 - queued)))
            try:
                yield reply, t0
            except EngineError as e:  # already in the engine's words
                reply.generation.error = str(e)
            except Exception as e:
                reply.generation.error = f"{type(e).__name__}: {e}"

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._loop = self._sem = None


def _stop_group(proc: subprocess.Popen, grace_s: float, log: Path | None) -> None:
    """SIGTERM the server's process group, SIGKILL after ``grace_s``, and reap the leader (no zombie)."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(grace_s)
        # Children the server forked (vLLM engine cores, uvicorn workers) share its group: kill stragglers.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if log is not None:
            log.unlink(missing_ok=True)


def listen_addresses(port: int, proc_net: Path = Path("/proc/net")) -> list[str] | None:
    """The local addresses with a TCP socket listening on ``port`` in this network namespace, from the kernel's own
    table (``/proc/net/tcp`` and ``tcp6``); None where there is no such table (not Linux)."""
    found: list[str] | None = None
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        found = found if found is not None else []
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != "0A":  # 0A: LISTEN
                continue
            addr_hex, port_hex = fields[1].split(":")
            if int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(addr_hex)
            # The kernel prints each 32-bit word of the address in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append(str(ipaddress.ip_address(raw)))
    return found


class LocalServer:
    """One server subprocess on loopback. ``start`` waits for ``GET ready_path`` to answer 200, checking in the
    kernel's socket table at every poll that the server listens on loopback only: a server listening on any other
    address (a command that binds 0.0.0.0) is stopped and refused as soon as it listens, not once it is ready (a
    large model can take minutes to load behind an open port)."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int,
        ready_path: str = "/v1/models",
        ready_timeout_s: float = 120.0,
        stop_grace_s: float = 10.0,
        name: str = "server",
    ) -> None:
        if not argv:
            raise EngineError(f"{name}: empty command")
        if not is_loopback_host(host):
            raise EngineError(f"{name}: host {host!r} is not loopback; a local server listens on 127.0.0.1 only")
        self.argv = argv
        self.env = env or {}  # over this process's environment: the device --gpu names (Engine.device_env)
        self.host, self.port = host, port
        self.ready_path = ready_path
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.name = name
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output_tail(self, lines: int = 20) -> str:
        """Last lines of the server's combined stdout/stderr."""
        if self.log_path is None or not self.log_path.exists():
            return "(no output captured)"
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", errors="replace")
        tail = text.splitlines()[-lines:]
        return "\n".join(tail) if tail else "(no output)"

    async def start(self) -> None:
        if self.proc is not None:
            raise EngineError(f"{self.name} already started")
        fd, path = tempfile.mkstemp(prefix=f"rig-{self.name}-", suffix=".log")
        self.log_path = Path(path)
        try:
            # A log file, not a pipe: an unread pipe fills up and blocks a chatty server.
            # New session: the whole process tree can be signalled as one group.
            # Popen returns once the child is forked; the wait for readiness below is async. A plain Popen, not
            # asyncio's Process: the weakref finalizer and _stop_group stop it without an event loop.
            self.proc = subprocess.Popen(  # noqa: ASYNC220 - only forks, never waits
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                env=os.environ | self.env if self.env else None,
                start_new_session=True,
            )
        except OSError as e:
            self.log_path.unlink(missing_ok=True)
            raise EngineError(f"could not start {self.name} ({shlex.join(self.argv)}): {e}") from None
        finally:
            os.close(fd)
        # If close() is never awaited (crash, forgotten engine), the server still dies with this process.
        self._finalizer = weakref.finalize(self, _stop_group, self.proc, 2.0, self.log_path)
        await self._wait_ready()

    async def _check_loopback_only(self) -> None:
        addrs = listen_addresses(self.port)
        exposed = sorted({a for a in addrs or [] if not ipaddress.ip_address(a).is_loopback})
        if exposed:
            await self.stop()
            raise EngineError(
                f"{self.name} listens on {', '.join(exposed)} port {self.port}, not only on loopback "
                f"(command: {shlex.join(self.argv)}); it was stopped. Bind it to 127.0.0.1: pass "
                "the server's host option with {host}, e.g. --host {host}"
            )

    async def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.ready_timeout_s
        url = self.url + self.ready_path
        last = "no answer yet"
        async with httpx.AsyncClient(timeout=5.0) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    tail = self.output_tail()
                    await self.stop()
                    raise EngineError(
                        f"{self.name} exited with code {code} before it was ready "
                        f"(command: {shlex.join(self.argv)}); last lines of its output:\n{tail}"
                    )
                await self._check_loopback_only()
                try:
                    r = await client.get(url)
                    if r.status_code == 200:
                        await self._check_loopback_only()  # it may have opened another socket meanwhile
                        return
                    last = f"HTTP {r.status_code}"
                except httpx.TransportError as e:
                    last = f"{type(e).__name__}"
                if time.monotonic() > deadline:
                    tail = self.output_tail()
                    await self.stop()
                    raise EngineError(
                        f"{self.name} did not answer GET {url} with 200 within "
                        f"{self.ready_timeout_s:g} s (last: {last}; command: {shlex.join(self.argv)}); "
                        f"raise engine_args.ready_timeout_s if it is just slow. Last lines of its "
                        f"output:\n{tail}"
                    )
                await asyncio.sleep(0.25)

    async def stop(self) -> None:
        """Terminate, then kill, and reap. Safe to call twice."""
        if self._finalizer is not None and self._finalizer.alive:
            self._finalizer.detach()
            assert self.proc is not None
            await asyncio.to_thread(_stop_group, self.proc, self.stop_grace_s, self.log_path)
