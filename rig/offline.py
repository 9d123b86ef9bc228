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
import re
import socket
import sys
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from rig.names import printable

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


class BadUri(NetworkRefused):
    """A tracking URI the guard does not read, so nothing is sent to it (no scheme, an unsupported one, a host or
    port that is not plain ASCII); the message names the flag or variable and the URI, its password redacted."""


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


# A host name as DNS writes it (ASCII letters, digits and hyphens, dot-separated labels, an optional root dot): a
# Unicode or escaped name would be looked up as something else than it reads.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}\.?$)(?:{_LABEL}\.)*{_LABEL}\.?")
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: int() reads "٥٠٠٠" as 5000
_USERINFO = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:%-]*")  # RFC 3986; a backslash or '@' in it is another host
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
LOCAL_SCHEMES = ("file", "sqlite")  # a file: URI or a local database: no network at all
NET_SCHEMES = {"http": 80, "https": 443}
GIVE = "give http://HOST:PORT, https://HOST, or sqlite:///PATH/mlflow.db for a local store"


def _host_port(host: str, port: str | None, bad: Callable[[str], Exception]) -> tuple[str, int | None]:
    """(host, port) of an authority's parts, strictly: an IPv6 address in brackets, an IPv4 address or an ASCII DNS
    name; a port of ASCII digits from 1 to 65535. ``bad(why)`` is the exception to raise."""
    if host.startswith("["):
        if not host.endswith("]"):
            raise bad("an IPv6 address goes in brackets: [ADDR]")
        try:
            host = str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            raise bad(f"{printable(host, 80)} is not an IPv6 address") from None
    elif not _HOST_NAME.fullmatch(host):
        raise bad(f"{printable(host, 80)!r} is not a host name (ASCII letters, digits, '-' and '.') or address")
    if port is None:
        return _key(host), None
    if not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        raise bad("the port must be a number from 1 to 65535")
    return _key(host), int(port)


def parse_allowed(entry: str, source: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address) as (host, port); anything else an AllowListError naming the
    entry and ``source`` (the flag or the environment variable it came from)."""
    text = entry.strip()
    host, sep, port = text.rpartition(":")
    if ":" in host and not host.startswith("["):
        sep = ""  # an IPv6 address without brackets: its last group would pass for a port
    if not sep or not host or any(c in "/@?#" or c.isspace() for c in host):  # a URL, or no port at all
        raise AllowListError(f"{source} {printable(entry, 200)!r}: expected HOST:PORT (an IPv6 address as [ADDR]:PORT)")

    def bad(why: str) -> AllowListError:
        return AllowListError(f"{source} {printable(entry, 200)!r}: {why}")

    found, number = _host_port(host, port, bad)
    assert number is not None
    return found, number


class TrackingUri(NamedTuple):
    """A tracking URI as `parse_uri` read it: its scheme, and for http(s) the host and port it reaches."""

    scheme: str
    host: str
    port: int | None


def redact(uri: str) -> str:
    """``uri`` as it may be printed: a password in it (``http://user:password@host``) replaced by ``***``."""
    head, sep, rest = uri.partition("//")
    if not sep:
        return uri
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, at, hostport = rest[:end].rpartition("@")
    if not at:
        return uri
    user, colon, _ = userinfo.partition(":")
    return f"{head}//{user}{':***' if colon else ''}@{hostport}{rest[end:]}"


def redact_in(text: str, uri: str) -> str:
    """``text`` (an error quoting ``uri``) with the URI's password, wherever it appears, shown as ``***``."""
    _, sep, rest = uri.partition("//")
    userinfo = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[0] if sep else ""
    password = userinfo.partition(":")[2]
    return text.replace(password, "***") if password else text


def parse_uri(uri: str, what: str = "--mlflow") -> TrackingUri:
    """The one reading of a tracking URI: a scheme is required (http, https, file, sqlite), the text is printable
    ASCII, an http(s) host is an ASCII name or an address with an ASCII port, credentials are RFC 3986 user info;
    anything else a BadUri naming ``what`` and the URI (its password redacted)."""

    def bad(why: str) -> BadUri:
        return BadUri(f"{what} {printable(redact(uri), 300)!r}: {why}")

    if not uri.strip():
        raise bad(f"no tracking URI; {GIVE}")
    odd = next((c for c in uri if not " " < c <= "~" or c == "\\"), None)
    if odd is not None:
        raise bad(f"{printable(odd)!r} is not allowed in a URI (printable ASCII only; percent-encode the rest)")
    m = _SCHEME.match(uri)
    scheme = m.group(1).lower() if m else ""
    if scheme in LOCAL_SCHEMES:
        return TrackingUri(scheme, "", None)
    if scheme not in NET_SCHEMES:
        if uri.lower().startswith("databricks"):  # its client reads DATABRICKS_HOST and waits on it
            raise bad("a Databricks workspace is not reachable offline; give a lab server allowed with --allow-host")
        if not scheme or len(scheme) == 1 or "." in scheme:  # a path, C: or host:port: no scheme says where it goes
            raise bad(f"no scheme; {GIVE}")
        raise bad(f"scheme {scheme!r} is not supported offline (http, https, file, sqlite)")
    rest = uri[m.end() :] if m else uri
    if not rest.startswith("//"):
        raise bad(f"expected {scheme}://HOST[:PORT]")
    authority = re.split(r"[/?#]", rest[2:], maxsplit=1)[0]
    userinfo, at, hostport = authority.rpartition("@")
    if at and not _USERINFO.fullmatch(userinfo):
        raise bad("the user and password before '@' hold a character a URI does not allow there")
    host, port = hostport, None
    split = hostport.rpartition(":")
    if split[1] and not split[2].endswith("]"):
        host, port = split[0], split[2]
    if not host:
        raise bad("no host")
    name, number = _host_port(host, port, bad)
    return TrackingUri(scheme, name, number or NET_SCHEMES[scheme])


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


def check_url(url: str, what: str = "URL") -> TrackingUri:
    """Refuse ``url`` before anything connects unless it is local (``file:``, ``sqlite:``), loopback, or an allowed
    lab host's port: BadUri for one `parse_uri` does not read, NetworkRefused naming the host and how to allow it."""
    parts = parse_uri(url, what)
    if parts.scheme in LOCAL_SCHEMES:
        return parts
    if _state["allowed"] or _is_loopback_host(parts.host) or _allowed(parts.host, parts.port):
        return parts
    raise NetworkRefused(f"{what} {printable(redact(url), 300)!r}: " + _refusal(parts.host, parts.port))


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


def install(allow: Iterable[str] = (), *, env: bool = True) -> None:
    """Set the hub offline switches and refuse non-loopback traffic in this process (and children's env), except
    to the lab hosts in ``RIG_ALLOW_HOSTS`` (unless ``env`` is False) and ``allow`` (``--allow-host`` entries)."""
    for k, v in OFFLINE_ENV.items():
        os.environ[k] = v
    if env:
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
