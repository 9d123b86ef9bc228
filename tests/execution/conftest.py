"""Fixtures of the run tests: a model server rig did not start."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from tests.engines.test_openai_compat import Stub, _handler

# A models.yaml whose one entry, `attached`, is the server at {url}.
ATTACHED_MODELS = """models:
  attached:
    engine: openai_compat
    weights: {{served: stub-model}}
    quantization: bf16
    context_length: 4096
    engine_args: {{base_url: "{url}"}}
"""


@pytest.fixture
def attached() -> Iterator[str]:
    """An OpenAI-compatible server rig did not start (the engine tests' stub), on loopback: its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(Stub()))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
