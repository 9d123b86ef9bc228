"""Air-gap guard: hub libraries offline, and no outbound connection except loopback.

Installed once per process by the CLI (and by the test suite). Record mode is the only caller of
``allow_network``; it says so loudly, because it is the one way data could leave the machine.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "OLLAMA_NOHISTORY": "1",
}


class NetworkRefused(ConnectionRefusedError):
    """Raised instead of opening a non-loopback connection."""


_state = {"installed": False, "allowed": False}
_orig_connect = socket.socket.connect
_orig_connect_ex = socket.socket.connect_ex
_orig_getaddrinfo = socket.getaddrinfo


def _is_loopback_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def check_address(address: object) -> None:
    if _state["allowed"]:
        return
    if isinstance(address, (str, bytes)):  # AF_UNIX path: local by definition
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback_host(host):
        raise NetworkRefused(
            f"rig is offline: refused outbound connection to {host!r}. Only loopback (127.0.0.0/8, ::1) is "
            f"allowed; use a local server, or --record for the one mode that may reach a live map provider."
        )


def guarded_connect(self: socket.socket, address):  # type: ignore[no-untyped-def]
    check_address(address)
    return _orig_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address):  # type: ignore[no-untyped-def]
    check_address(address)
    return _orig_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    # Name lookups of remote hosts are refused too: a DNS query is itself outbound traffic.
    if host is not None and not _is_loopback_host(host):
        check_address((host, 0))
    return _orig_getaddrinfo(host, *args, **kwargs)


def install() -> None:
    """Set the hub offline switches and refuse non-loopback sockets in this process (and children's env)."""
    for k, v in OFFLINE_ENV.items():
        os.environ[k] = v
    if _state["installed"]:
        return
    socket.socket.connect = guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]
    _state["installed"] = True


def allow_network(reason: str) -> None:
    """Lift the guard (record mode only)."""
    _state["allowed"] = True
    print(f"WARNING: network access ENABLED for {reason}. Outbound connections are allowed in this process.",
          file=sys.stderr)


def is_installed() -> bool:
    return _state["installed"] and not _state["allowed"]
