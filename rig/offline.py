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

A lab's own hosts (an on-prem MLflow tracking server) are an explicit allowlist of ``HOST:PORT`` entries
(``--allow-host`` on the commands that talk to one, and ``RIG_ALLOW_HOSTS``, comma separated): their name lookups and
connections to that port of the addresses the name resolved to when it was allowed pass; every other address stays
refused. ``check_url`` refuses a URL outside loopback, ``file:`` and the allowlist before anything connects, naming
the host.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "OLLAMA_NOHISTORY": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "MLFLOW_DISABLE_TELEMETRY": "true",  # MLflow reads DO_NOT_TRACK only when it is "true", not "1"
}


ALLOW_ENV = "RIG_ALLOW_HOSTS"  # a lab's own hosts, comma-separated HOST:PORT entries


class NetworkRefused(ConnectionRefusedError):
    """Raised instead of sending anything to a non-loopback address or name."""


class AllowListError(ValueError):
    """An allowlist entry that is not HOST:PORT; the message names the entry and where it came from."""


_state = {"installed": False, "allowed": False}
# The allowlist: entries as given (recorded in manifests), names (lowercase) whose lookups pass, and the
# (address, port) pairs connections may reach: each entry's name and what it resolved to when it was allowed.
_allow: dict[str, Any] = {"entries": [], "names": set(), "endpoints": set()}

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


def _key(host: object) -> str:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    return str(host).lower().rstrip(".").split("%")[0]


def _allowed(host: object, port: object) -> bool:
    return (_key(host), port) in _allow["endpoints"]


def _refusal(host: object, port: object = None) -> str:
    where = f"{host!r}" if port in (None, 0) else f"{host!r} port {port}"
    allowed = ", ".join(_allow["entries"]) or "none"
    return (
        f"rig is offline: refused outbound traffic to {where}. Only loopback (127.0.0.0/8, ::1) and the lab hosts "
        f"allowed with --allow-host HOST:PORT or {ALLOW_ENV} (now: {allowed}) are reachable; use a local server, "
        "or --record for the one mode that may reach a live map provider."
    )


def check_address(address: object) -> None:
    """Raise NetworkRefused unless the socket address ``address`` is loopback, a local (AF_UNIX) path or an allowed
    lab host's port."""
    if _state["allowed"]:
        return
    if isinstance(address, (str, bytes)):  # a socket address that is a str is an AF_UNIX path: local
        return
    host = address[0] if isinstance(address, tuple) and address else address
    port = address[1] if isinstance(address, tuple) and len(address) > 1 else None
    if not _is_loopback_host(host) and not _allowed(host, port):
        raise NetworkRefused(_refusal(host, port))


def _check_name(host: object) -> None:
    # A lookup of a remote name is itself outbound traffic (a DNS query); None means the local wildcard. An allowed
    # lab host's name may be looked up (the query goes to the lab's resolver, the answer is checked at connect).
    if host is None or host == "" or _is_loopback_host(host) or _key(host) in _allow["names"]:
        return
    if _state["allowed"]:
        return
    raise NetworkRefused(_refusal(host))


def parse_allowed(entry: str, source: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address) as (host, port); anything else an AllowListError naming the
    entry and ``source`` (the flag or the environment variable it came from)."""
    text = entry.strip()
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        sep = ""  # an IPv6 address without brackets: its last group would pass for a port
    if not sep or not host or any(c.isspace() or c in "/@?#[]" for c in host):
        raise AllowListError(f"{source} {entry!r}: expected HOST:PORT (an IPv6 address as [ADDR]:PORT)")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise AllowListError(f"{source} {entry!r}: the port must be a number from 1 to 65535")
    return _key(host), int(port)


def env_allowed() -> list[str]:
    """The entries of ``RIG_ALLOW_HOSTS`` (comma separated, blanks dropped)."""
    return [e.strip() for e in os.environ.get(ALLOW_ENV, "").split(",") if e.strip()]


def allow_hosts(entries: Iterable[str], source: str = "--allow-host") -> None:
    """Add a lab's own ``HOST:PORT`` entries to the allowlist (all validated before any is added). A name is
    resolved now, its lookup let through, and the addresses it gave allowed on that port."""
    parsed = [(e.strip(), *parse_allowed(e, source)) for e in entries]
    for entry, host, port in parsed:
        if entry not in _allow["entries"]:
            _allow["entries"].append(entry)
        _allow["endpoints"].add((host, port))
        _allow["names"].add(host)
        try:
            ipaddress.ip_address(host)
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
            except OSError:
                continue  # not resolvable now: connecting will fail with the resolver's own error
            _allow["endpoints"].update((_key(info[4][0]), port) for info in infos)


def allowed_entries() -> list[str]:
    """The allowlist as given (``HOST:PORT`` entries), for the manifest of a run or an export."""
    return list(_allow["entries"])


LOCAL_SCHEMES = ("", "file", "sqlite")  # a path, a file: URI or a local database: no network at all


def check_url(url: str, what: str = "URL") -> None:
    """Refuse ``url`` before anything connects unless it is local (a path, ``file:``, ``sqlite:``), loopback, or an
    allowed lab host's port: NetworkRefused naming the host and how to allow it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in LOCAL_SCHEMES:
        return
    if scheme not in ("http", "https"):
        raise NetworkRefused(f"{what} {url!r}: scheme {scheme!r} is not supported offline (http, https, file)")
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise NetworkRefused(f"{what} {url!r}: the port is not a number from 0 to 65535") from None
    if _state["allowed"] or _is_loopback_host(host) or _allowed(host, port):
        return
    raise NetworkRefused(f"{what} {url!r}: " + _refusal(host, port))


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


def install(allow: Iterable[str] = ()) -> None:
    """Set the hub offline switches and refuse non-loopback traffic in this process (and children's env), except
    to the lab hosts in ``RIG_ALLOW_HOSTS`` and ``allow`` (``--allow-host`` entries)."""
    for k, v in OFFLINE_ENV.items():
        os.environ[k] = v
    allow_hosts(env_allowed(), ALLOW_ENV)
    allow_hosts(allow)
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
