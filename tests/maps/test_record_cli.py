"""`rig maps record`: dry run without --record; with it, misses are fetched (from a loopback server) and stored."""

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest


class _H(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        q = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        body = json.dumps({"status": "1", "name": q.get("keywords")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


@pytest.fixture()
def server():  # type: ignore[no-untyped-def]
    srv = HTTPServer(("127.0.0.1", 0), _H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/place"
    srv.shutdown()


def rig(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rig.cli", "maps", "record", *args], capture_output=True, text=True, timeout=60
    )


def test_dry_run_then_record_then_replay(tmp_path: Path, server: str) -> None:
    cfg = tmp_path / "rec.yaml"
    cfg.write_text(f"provider: testmaps\nendpoints:\n  poi: {{url: '{server}'}}\nkeys:\n  poi: {{names: [keywords]}}\n")
    qs = tmp_path / "q.jsonl"
    qs.write_text(
        '{"endpoint": "poi", "args": {"keywords": "Ateneum"}}\n{"endpoint": "poi", "args": {"keywords": "Kiasma"}}\n'
    )
    store = tmp_path / "s.sqlite"
    dry = rig(str(cfg), str(qs), "--store", str(store))
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["miss"] == 2 and "network access ENABLED" not in dry.stderr
    live = rig(str(cfg), str(qs), "--store", str(store), "--record")
    assert live.returncode == 0, live.stderr
    assert json.loads(live.stdout)["recorded"] == 2
    assert "network access ENABLED" in live.stderr  # said loudly
    again = rig(str(cfg), str(qs), "--store", str(store))
    assert json.loads(again.stdout)["hit"] == 2  # offline use of the recorded store needs no flag


def test_bad_query_line_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "rec.yaml"
    cfg.write_text("provider: p\nendpoints:\n  poi: {url: 'http://127.0.0.1:9/x'}\n")
    qs = tmp_path / "q.jsonl"
    qs.write_text('{"endpoint": "poi", "args": {}}\n{"endpoint": "nope", "args": {}}\n')
    r = rig(str(cfg), str(qs), "--store", str(tmp_path / "s.sqlite"))
    assert r.returncode == 2 and "line 2" in r.stderr and "'nope'" in r.stderr
