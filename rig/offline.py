"""Air-gap guard: hub libraries offline, and no outbound traffic except loopback.

The guard is a Python audit hook (``sys.addaudithook``): CPython's socket module raises an audit event inside the C
implementation before every connect, sendto, sendmsg and name lookup, so the hook sees calls made through
``socket.socket``, the bare ``_socket`` type, asyncio and ``socket.gethostbyname`` alike — wrapping Python-level
methods missed the last three. A hook cannot be removed; ``allow_network`` (record mode, the one caller) makes it
stand aside, and says so loudly, because it is the one way data could leave the machine.

Packet (AF_PACKET) and raw IP sockets are refused when created: they write frames or headers of their own, past any
address check. Outside its reach: child processes (a spawned llama.cpp server), which get the offline environment
switches but not the hook; native code calling libc directly; a socket object adopted from a descriptor made
elsewhere (``socket.socket(fileno=...)``). A proxy listening on loopback can forward anywhere: a connection to it is
loopback as far as this process can see.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from typing import Any

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "OLLAMA_NOHISTORY": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
}


class NetworkRefused(ConnectionRefusedError):
    """Raised instead of sending anything to a non-loopback address or name."""


_state = {"installed": False, "allowed": False}

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _is_loopback_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    if host.lower().rstrip(".") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def check_address(address: object) -> None:
    """Raise NetworkRefused unless the socket address ``address`` is loopback or a local (AF_UNIX) path."""
    if _state["allowed"]:
        return
    if isinstance(address, (str, bytes)):  # a socket address that is a str is an AF_UNIX path: local
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback_host(host):
        raise NetworkRefused(
            f"rig is offline: refused outbound traffic to {host!r}. Only loopback (127.0.0.0/8, ::1) is "
            f"allowed; use a local server, or --record for the one mode that may reach a live map provider."
        )


def _check_name(host: object) -> None:
    # A lookup of a remote name is itself outbound traffic (a DNS query); None means the local wildcard.
    if host is not None and host != "" and not _is_loopback_host(host):
        check_address((host, 0))


# Sockets that bypass addressing altogether: a packet socket writes whole frames to an interface and a raw IP socket
# writes its own headers, so neither passes through connect/sendto checks that mean anything. rig needs neither.
_AF_PACKET = getattr(socket, "AF_PACKET", 17)
_RAW_TYPES = {getattr(socket, "SOCK_RAW", 3), getattr(socket, "SOCK_PACKET", 10)}
_IP_FAMILIES = {socket.AF_INET, socket.AF_INET6}
_TYPE_MASK = 0xF  # SOCK_NONBLOCK and SOCK_CLOEXEC are flags or-ed into the type


def check_socket(family: int, type_: int) -> None:
    """Raise NetworkRefused for a packet socket (AF_PACKET) or a raw IP socket (SOCK_RAW, SOCK_PACKET)."""
    if _state["allowed"]:
        return
    if family == _AF_PACKET or (family in _IP_FAMILIES and type_ >= 0 and type_ & _TYPE_MASK in _RAW_TYPES):
        kind = "packet (AF_PACKET)" if family == _AF_PACKET else "raw IP"
        raise NetworkRefused(
            f"rig is offline: refused to open a {kind} socket, which sends frames or packets past the loopback "
            "check. Only loopback traffic over ordinary sockets is allowed."
        )


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Called for every audit event in the process: leave quickly for anything that is not a socket call.
    if not event.startswith("socket.") or _state["allowed"]:
        return
    if event == "socket.__new__":  # (socket, family, type, proto); -1s when adopting an existing descriptor
        check_socket(args[1], args[2])
    elif event in ("socket.connect", "socket.sendto"):
        check_address(args[1])
    elif event == "socket.sendmsg":
        if args[1] is not None:  # None: a connected socket, whose connect was checked
            check_address(args[1])
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        _check_name(args[0])
    elif event == "socket.getnameinfo":
        addr = args[0]
        _check_name(addr[0] if isinstance(addr, tuple) and addr else addr)


def install() -> None:
    """Set the hub offline switches and refuse non-loopback traffic in this process (and children's env)."""
    for k, v in OFFLINE_ENV.items():
        os.environ[k] = v
    if _state["installed"]:
        return
    sys.addaudithook(_audit)
    _state["installed"] = True


def allow_network(reason: str) -> None:
    """Lift the guard (record mode only)."""
    _state["allowed"] = True
    print(
        f"WARNING: network access ENABLED for {reason}. Outbound connections are allowed in this process.",
        file=sys.stderr,
    )


def is_installed() -> bool:
    return _state["installed"] and not _state["allowed"]
