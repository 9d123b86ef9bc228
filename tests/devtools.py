"""Headless Chromium driven over its DevTools protocol on loopback, for pages that fill themselves in after loading
(`inspect view` fetches a log and renders it well after `--dump-dom` would have returned): open a URL, wait until
the page's text holds what is expected, then read the page (its text, title, a probe expression) and optionally
take a screenshot. Only ever run inside a network namespace with no route out (`unshare -n`), as the other browser
tests do: Chromium makes background requests of its own.

    python -m tests.devtools URL --wait TEXT [--wait TEXT ...] --out page.json [--shot page.png] [--probe JS]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# A quiet headless browser that asks nothing of the network (tests/render/test_html.py uses these too).
HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
FLAGS = (*HEADLESS, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")


class DevToolsError(Exception):
    pass


async def _drive(
    port: int, url: str, wait: list[str], deadline: float, probe: str, shot: bool
) -> tuple[dict[str, Any], bytes | None]:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as r:
            (page,) = [t for t in await r.json() if t["type"] == "page"]
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = itertools.count(1)

            async def call(method: str, **params: Any) -> Any:
                my = next(ids)
                await ws.send_json({"id": my, "method": method, "params": params})
                async for msg in ws:
                    data = json.loads(msg.data)
                    if data.get("id") == my:
                        if "error" in data:
                            raise DevToolsError(f"{method}: {data['error']}")
                        return data["result"]
                raise DevToolsError(f"{method}: the DevTools connection closed")

            async def value(expression: str) -> Any:
                got = await call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
                return got["result"].get("value")

            await call("Page.enable")
            await call("Page.navigate", url=url)
            while True:
                text = await value("document.body ? document.body.innerText : ''") or ""
                if all(w in text for w in wait):
                    break
                if time.monotonic() > deadline:
                    missing = [w for w in wait if w not in text]
                    raise DevToolsError(f"{url}: {missing} not on the page in time: {text[-1500:]}")
                await asyncio.sleep(0.25)
            out = {"text": text, "title": await value("document.title"), "probe": await value(probe)}
            png = None
            if shot:
                await asyncio.sleep(0.5)  # let the last layout settle before the picture
                png = base64.b64decode((await call("Page.captureScreenshot", format="png"))["data"])
            return out, png


@contextlib.contextmanager
def _profile() -> Iterator[str]:
    """A fresh Chromium profile folder, removed afterwards. Chromium's helper processes may still write into it for
    a moment after the browser exits (on a loaded host: 'Directory not empty'), so removal is retried a while."""
    path = tempfile.mkdtemp(prefix="rig-chromium-")
    try:
        yield path
    finally:
        for _ in range(50):
            try:
                shutil.rmtree(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        shutil.rmtree(path, ignore_errors=True)


def open_page(
    url: str,
    wait: list[str],
    timeout_s: float = 40,
    probe: str = "null",
    shot: Path | None = None,
    size: tuple[int, int] = (1400, 1000),
) -> dict[str, Any]:
    """The page at ``url`` once its text holds every string of ``wait``: its text, title and ``probe``'s value."""
    deadline = time.monotonic() + timeout_s
    with _profile() as profile:
        proc = subprocess.Popen(
            [CHROMIUM or "chromium", *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"  # Chromium writes the port it took here
            while not (port_file.is_file() and port_file.read_text().strip()):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise DevToolsError(f"chromium did not open its DevTools port (exit {proc.poll()})")
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            out, png = asyncio.run(_drive(port, url, wait, deadline, probe, shot is not None))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if shot is not None and png is not None:
        shot.write_bytes(png)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--wait", action="append", default=[])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shot", type=Path)
    ap.add_argument("--probe", default="null")
    ap.add_argument("--timeout", type=float, default=40)
    ap.add_argument("--size", default="1400,1000")
    a = ap.parse_args(argv)
    w, h = (int(x) for x in a.size.split(","))
    try:
        page = open_page(a.url, a.wait, a.timeout, a.probe, a.shot, (w, h))
    except Exception as e:  # whatever went wrong goes into --out, where the test reads it
        page = {"error": f"{type(e).__name__}: {e}"}
    with contextlib.suppress(OSError):
        a.out.write_text(json.dumps(page))
    return 1 if "error" in page else 0


if __name__ == "__main__":
    sys.exit(main())
