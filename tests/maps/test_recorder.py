from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from rig.maps.recorder import RecordEndpoint, Recorder
from rig.maps.replay import KeySpec, ReplayStore


class _Handler(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict]] = []

    def do_GET(self) -> None:
        q = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        _Handler.seen.append(q)
        body = json.dumps({"status": "1", "echo": q.get("keywords")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # keep test output quiet
        pass


@pytest.fixture()
def local_server():
    srv = HTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v3/place/text"
    srv.shutdown()
    srv.server_close()


def test_record_requires_enable(tmp_path) -> None:
    with pytest.raises(PermissionError):
        Recorder(ReplayStore(tmp_path / "r.sqlite"), "amap", {})


def test_record_then_replay_over_loopback(tmp_path, local_server, monkeypatch) -> None:
    from rig.maps.recorder import http_transport

    monkeypatch.setenv("RIG_TEST_MAP_KEY", "secret-key")
    store = ReplayStore(tmp_path / "r.sqlite")
    store.register("amap", "query_poi", KeySpec(names=["keywords", "city"]))
    ep = RecordEndpoint(url=local_server, key_param="key", key_env="RIG_TEST_MAP_KEY", static_params={"output": "json"})
    # Passing the real HTTP transport explicitly keeps the offline guard on: loopback is still allowed.
    rec = Recorder(store, "amap", {"query_poi": ep}, enable=True, transport=http_transport)
    first = rec.call("query_poi", {"keywords": "Ateneum", "city": "Helsinki"})
    assert first.label == "hit" and first.response == {"status": "1", "echo": "Ateneum"} and rec.recorded == 1
    assert _Handler.seen[-1]["key"] == "secret-key" and _Handler.seen[-1]["output"] == "json"
    again = rec.call("query_poi", {"keywords": "ATENEUM", "city": "helsinki"})
    assert again.label == "hit" and rec.recorded == 1  # answered from the store, no second request
    raw = (tmp_path / "r.sqlite").read_bytes()
    assert b"secret-key" not in raw
    assert rec.call("unconfigured", {"x": 1}).label == "miss"
    store.close()
