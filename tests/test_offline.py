import socket
import threading

import pytest

from rig import offline


def test_hub_switches_set() -> None:
    import os

    offline.install()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


@pytest.mark.parametrize("addr", [("192.0.2.1", 443), ("8.8.8.8", 53), ("2001:db8::1", 80, 0, 0), ("example.org", 80)])
def test_non_loopback_refused_by_guard(addr: tuple) -> None:
    offline.install()
    with pytest.raises(offline.NetworkRefused, match="offline"):
        offline.check_address(addr)


def test_socket_connect_refused_before_any_packet() -> None:
    offline.install()
    assert socket.socket.connect is offline.guarded_connect
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(offline.NetworkRefused):
            s.connect(("192.0.2.1", 80))  # the guard raises before the connect syscall
        with pytest.raises(offline.NetworkRefused):
            socket.getaddrinfo("example.org", 443)
    finally:
        s.close()


def test_loopback_allowed() -> None:
    offline.install()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    t = threading.Thread(target=lambda: srv.accept()[0].close(), daemon=True)
    t.start()
    c = socket.create_connection(("localhost", port), timeout=2)
    c.close()
    t.join(2)
    srv.close()
