import os
import re
import socket
import threading
from pathlib import Path

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
    assert offline.is_installed()
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


# Every path by which Python code can send a packet or a name lookup off the machine is refused by the guard itself
# (NetworkRefused, naming the offline rule), not by the network: under `unshare -n` an unguarded call fails too, but
# with "Network is unreachable" or a resolver error, which these tests tell apart.
def _udp() -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def _raw_c_socket_connect() -> None:
    import _socket

    s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        s.connect(("192.0.2.1", 80))
    finally:
        s.close()


def _asyncio_connect() -> None:
    import asyncio

    asyncio.run(asyncio.open_connection("192.0.2.1", 80))


def _asyncio_udp() -> None:
    """asyncio's datagram transport hands send errors to the protocol instead of raising: re-raise what it got."""
    import asyncio

    errors: list[Exception] = []

    class Keep(asyncio.DatagramProtocol):
        def error_received(self, exc: Exception) -> None:
            errors.append(exc)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(Keep, local_addr=("0.0.0.0", 0))
        try:
            transport.sendto(b"x", ("192.0.2.1", 53))
            await asyncio.sleep(0)
        finally:
            transport.close()

    asyncio.run(go())
    if errors:
        raise errors[0]


def _packet_frame() -> None:
    """A whole Ethernet frame written to an interface: no address for connect/sendto checks to see. (Inside
    `unshare -n` only `lo` exists, so the unguarded control sends it there, as root; elsewhere it needs CAP_NET_RAW.)"""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    try:
        s.bind(("lo", 0))
        s.send(b"\xff" * 6 + b"\x00" * 6 + b"\x88\xb5" + b"rig offline probe".ljust(46, b"\0"))
    finally:
        s.close()


def _raw_ip() -> None:
    """A raw IP socket writes its own headers (with IP_HDRINCL, its own destination too)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.IPPROTO_UDP)
    try:
        s.sendto(b"\0" * 8, ("127.0.0.1", 0))
    finally:
        s.close()


OUTBOUND = {
    "packet_socket_frame": _packet_frame,
    "raw_ip_socket": _raw_ip,
    "raw_ipv6_socket": lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP).close(),
    "udp_sendto": lambda: _udp().sendto(b"x", ("8.8.8.8", 53)),
    "udp_sendmsg": lambda: _udp().sendmsg([b"x"], [], 0, ("8.8.8.8", 53)),
    "udp_connect": lambda: _udp().connect(("192.0.2.1", 53)),
    "tcp_connect_ex": lambda: socket.socket().connect_ex(("192.0.2.1", 80)),
    "ipv6_connect": lambda: socket.socket(socket.AF_INET6).connect(("2001:db8::1", 80, 0, 0)),
    "c_socket_connect": _raw_c_socket_connect,
    "create_connection": lambda: socket.create_connection(("example.org", 80), timeout=1),
    "gethostbyname": lambda: socket.gethostbyname("example.org"),
    "gethostbyname_ex": lambda: socket.gethostbyname_ex("example.org"),
    "gethostbyaddr": lambda: socket.gethostbyaddr("192.0.2.1"),
    "getnameinfo": lambda: socket.getnameinfo(("192.0.2.1", 80), 0),
    "getaddrinfo": lambda: socket.getaddrinfo("example.org", 443),
    "asyncio_open_connection": _asyncio_connect,
    "asyncio_datagram_sendto": _asyncio_udp,
}


@pytest.mark.parametrize("name", sorted(OUTBOUND))
def test_every_outbound_path_is_refused(name: str) -> None:
    offline.install()
    with pytest.raises(offline.NetworkRefused, match="rig is offline"):
        OUTBOUND[name]()


def test_loopback_lookups_and_udp_allowed() -> None:
    offline.install()
    assert socket.gethostbyname("localhost").startswith("127.")
    assert socket.getaddrinfo("127.0.0.1", 80)
    s = _udp()
    try:
        s.sendto(b"x", ("127.0.0.1", 9))
    finally:
        s.close()


_PROBE = """
import json, subprocess, sys
from rig import offline
# A new namespace's loopback is down: up, the unguarded packet and raw probes have somewhere to send to.
subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True)
from tests.test_offline import OUTBOUND
if sys.argv[1] == "guarded":
    offline.install()
out = {}
for name, call in OUTBOUND.items():
    try:
        call()
        out[name] = "sent"
    except offline.NetworkRefused as e:
        out[name] = "guard: " + str(e)[:60]
    except Exception as e:
        out[name] = type(e).__name__ + ": " + str(e)[:80]
print(json.dumps(out))
"""


def _unshared(mode: str) -> dict[str, str]:
    import json
    import shutil
    import subprocess
    import sys

    from tests.conftest import REPO

    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("unshare -n is not allowed on this machine")
    cmd = ["unshare", "-n", sys.executable, "-c", _PROBE, mode]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def inside_unshare() -> dict[str, dict[str, str]]:
    """Every outbound call, made in a fresh interpreter inside `unshare -n` (no network at all), once with the guard
    and once without: the unguarded run is the control that shows the namespace's own failure looks different."""
    return {mode: _unshared(mode) for mode in ("guarded", "bare")}


@pytest.mark.parametrize("name", sorted(OUTBOUND))
def test_every_outbound_path_is_refused_by_the_guard_inside_unshare(
    name: str, inside_unshare: dict[str, dict[str, str]]
) -> None:
    assert inside_unshare["guarded"][name].startswith("guard: rig is offline"), inside_unshare["guarded"][name]
    assert not inside_unshare["bare"][name].startswith("guard"), inside_unshare["bare"][name]


def test_guard_in_a_fresh_process() -> None:
    """The guard as the CLI installs it, in a new interpreter (no test fixtures), inside `unshare -n` when the
    machine allows it."""
    import shutil
    import subprocess
    import sys

    probe = (
        "import socket, _socket\n"
        "from rig import offline\n"
        "offline.install()\n"
        "refused = 0\n"
        "for f in (lambda: _socket.socket().connect(('192.0.2.1', 80)),\n"
        "          lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53)),\n"
        "          lambda: socket.gethostbyname('example.org')):\n"
        "    try:\n"
        "        f()\n"
        "    except offline.NetworkRefused:\n"
        "        refused += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print(refused)\n"
    )
    cmd = [sys.executable, "-c", probe]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        cmd = ["unshare", "-n", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


def test_packet_and_raw_sockets_opened_bare_inside_unshare(inside_unshare: dict[str, dict[str, str]]) -> None:
    """The control for the refusals above: as root inside the namespace, the unguarded process really writes the frame
    and the raw packet (on loopback, the only interface there), so the guard's refusal is what stops them."""
    import os

    if os.geteuid() != 0:
        pytest.skip("packet and raw sockets need root (CAP_NET_RAW) to open at all")
    assert inside_unshare["bare"]["packet_socket_frame"] == "sent"
    assert inside_unshare["bare"]["raw_ip_socket"] == "sent"


def test_ordinary_local_sockets_still_open() -> None:
    """The refusal is by family and type: TCP, UDP, Unix and netlink sockets (the kernel, not the network) open."""
    offline.install()
    for family, type_ in (
        (socket.AF_INET, socket.SOCK_STREAM),
        (socket.AF_INET6, socket.SOCK_DGRAM),
        (socket.AF_UNIX, socket.SOCK_STREAM),
        (socket.AF_NETLINK, socket.SOCK_RAW),
    ):
        socket.socket(family, type_).close()


# A lab's own hosts: an explicit allowlist of HOST:PORT entries (--allow-host, RIG_ALLOW_HOSTS).
@pytest.fixture
def fresh_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty allowlist for one test (the process-wide one is left as the suite had it)."""
    monkeypatch.setattr(offline, "_allow", {"entries": [], "names": set(), "endpoints": set()})
    monkeypatch.delenv(offline.ALLOW_ENV, raising=False)


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [("mlflow.lab:5000", ("mlflow.lab", 5000)), ("10.0.0.5:443", ("10.0.0.5", 443)), ("[fd00::5]:80", ("fd00::5", 80))],
)
def test_allowlist_entries_parse(entry: str, parsed: tuple[str, int]) -> None:
    assert offline.parse_allowed(entry, "--allow-host") == parsed


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("mlflow.lab", "expected HOST:PORT"),
        ("fd00::5:80", "expected HOST:PORT"),
        ("http://mlflow.lab:5000", "expected HOST:PORT"),
        (":5000", "expected HOST:PORT"),
        ("mlflow.lab:0", "the port must be a number from 1 to 65535"),
        ("mlflow.lab:65536", "the port must be a number from 1 to 65535"),
        ("mlflow.lab:http", "the port must be a number from 1 to 65535"),
    ],
)
def test_allowlist_refuses_what_is_not_host_port(entry: str, why: str) -> None:
    with pytest.raises(offline.AllowListError, match=f"RIG_ALLOW_HOSTS '{re.escape(entry)}': {why}"):
        offline.parse_allowed(entry, "RIG_ALLOW_HOSTS")


def test_allowed_host_passes_on_its_port_only(fresh_allowlist: None) -> None:
    offline.install(["192.0.2.7:5000"])
    assert offline.allowed_entries() == ["192.0.2.7:5000"]
    offline.check_address(("192.0.2.7", 5000))
    with pytest.raises(offline.NetworkRefused, match=r"'192.0.2.7' port 5001.*now: 192.0.2.7:5000"):
        offline.check_address(("192.0.2.7", 5001))
    with pytest.raises(offline.NetworkRefused, match=r"'192\.0\.2\.8' port 5000"):
        offline.check_address(("192.0.2.8", 5000))


def test_environment_allowlist_is_read_and_a_bad_entry_named(
    fresh_allowlist: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(offline.ALLOW_ENV, " 192.0.2.9:8080 , ")
    offline.install()
    assert offline.allowed_entries() == ["192.0.2.9:8080"]
    monkeypatch.setenv(offline.ALLOW_ENV, "192.0.2.9")
    with pytest.raises(offline.AllowListError, match=r"RIG_ALLOW_HOSTS '192\.0\.2\.9'"):
        offline.install()


def test_urls_checked_before_connecting(fresh_allowlist: None, tmp_path: Path) -> None:
    offline.install()
    for local in (tmp_path.as_uri(), f"sqlite:///{tmp_path}/m.db", "http://127.0.0.1:5000"):
        offline.check_url(local)
    with pytest.raises(offline.BadUri, match="no scheme"):  # a bare path says nothing of where it goes
        offline.check_url(str(tmp_path))
    offline.check_url("http://localhost:5000/")
    with pytest.raises(
        offline.NetworkRefused, match=r"tracking URI 'http://mlflow.lab:5000': .*'mlflow.lab' port 5000"
    ):
        offline.check_url("http://mlflow.lab:5000", "tracking URI")
    with pytest.raises(offline.NetworkRefused, match="scheme 'postgresql' is not supported offline"):
        offline.check_url("postgresql://db.lab/mlflow")
    offline.allow_hosts(["mlflow.lab:5000"])  # not resolvable here: allowed by name
    offline.check_url("http://mlflow.lab:5000")
    offline.check_url("http://MLFLOW.lab.:5000/api")
    with pytest.raises(offline.NetworkRefused, match=r"'mlflow\.lab' port 443"):
        offline.check_url("https://mlflow.lab/")  # the default port is not the allowed one


_LAB_PROBE = """
import json, socket, subprocess, sys, threading
from rig import offline
# A lab host stand-in inside the namespace: a non-loopback address on lo, a TCP server on it.
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "198.51.100.7/32", "dev", "lo"], check=True)
srv = socket.socket()
srv.bind(("198.51.100.7", 0))
srv.listen(4)
port = srv.getsockname()[1]
threading.Thread(target=lambda: [srv.accept()[0].close() for _ in range(4)], daemon=True).start()
offline.install(sys.argv[1:] and [a.replace("PORT", str(port)) for a in sys.argv[1:]])
out = {}
for name, addr in (("allowed", ("198.51.100.7", port)), ("other_port", ("198.51.100.7", port + 1))):
    try:
        socket.create_connection(addr, timeout=5).close()
        out[name] = "connected"
    except offline.NetworkRefused as e:
        out[name] = "guard: " + str(e)
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""


def _lab_probe(*allow: str) -> dict[str, str]:
    import json
    import shutil
    import subprocess
    import sys

    from tests.conftest import REPO

    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("unshare -n is not allowed on this machine")
    cmd = ["unshare", "-n", sys.executable, "-c", _LAB_PROBE, *allow]
    out = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "RIG_ALLOW_HOSTS": ""}
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_lab_host_is_reached_only_when_allowed_inside_unshare() -> None:
    """Inside `unshare -n` a non-loopback address serves on a real socket: allowed as HOST:PORT, the guard lets the
    connection through; on another port, or not allowed at all, the guard refuses it naming the host."""
    allowed = _lab_probe("198.51.100.7:PORT")
    assert allowed["allowed"] == "connected"
    assert allowed["other_port"].startswith("guard: rig is offline: refused outbound traffic to '198.51.100.7' port")
    bare = _lab_probe()
    assert bare["allowed"].startswith("guard: rig is offline") and "(now: none)" in bare["allowed"]


# One strict reading of tracking URIs and allowlist entries (issue 51).
@pytest.mark.parametrize(
    ("uri", "why"),
    [
        ("", "no tracking URI"),
        ("mlruns", "no scheme"),  # was taken as a local path: ./mlflow.db and ./mlruns written silently
        ("/tmp/mlruns", "no scheme"),
        ("mlflow.lab:5000", "no scheme"),
        ("databricks", "a Databricks workspace is not reachable offline"),  # hung on DATABRICKS_HOST
        ("databricks://profile", "a Databricks workspace is not reachable offline"),
        ("postgresql://db.lab/mlflow", "scheme 'postgresql' is not supported offline"),
        ("http:mlflow.lab", "expected http://HOST"),
        ("http://evil\\@127.0.0.1/", "'\\\\\\\\' is not allowed in a URI"),  # requests reads evil as the host
        ("http://[x]/", r"\[x\] is not an IPv6 address"),  # was a traceback
        ("http://[::1/", "an IPv6 address goes in brackets"),
        ("http://127.0.0.1\x1b[2J:5000/", r"'\\\\x1b' is not allowed in a URI"),  # escapes reach no terminal
        ("http://mlflow.lab:٥٠٠٠/", "'٥' is not allowed in a URI"),  # int() reads it as 5000
        ("http://mlflöw.lab/", "'ö' is not allowed in a URI"),
        ("http://127.0.0.1:0/", "the port must be a number from 1 to 65535"),
        ("http://127.0.0.1:99999/", "the port must be a number from 1 to 65535"),
        ("http://127.0.0.1:+80/", "the port must be a number from 1 to 65535"),
        ("http://:5000/", "no host"),
        ("http://a_b.lab/", "is not a host name"),
        ("http://%31%32%37.0.0.1/", "is not a host name"),
        ("http://u<ser:pw@127.0.0.1/", "the user and password before '@'"),
    ],
)
def test_a_tracking_uri_rig_does_not_read_is_refused_naming_it(uri: str, why: str) -> None:
    with pytest.raises(offline.BadUri, match=why) as e:
        offline.parse_uri(uri, "--mlflow")
    assert str(e.value).startswith("--mlflow '")


@pytest.mark.parametrize(
    ("uri", "parsed"),
    [
        ("http://127.0.0.1:5000", ("http", "127.0.0.1", 5000)),
        ("HTTPS://MLflow.Lab./api", ("https", "mlflow.lab", 443)),
        ("http://[::1]:8080/x?y#z", ("http", "::1", 8080)),
        ("http://[::1]", ("http", "::1", 80)),
        ("http://user:p%40ss@10.0.0.5:5000/", ("http", "10.0.0.5", 5000)),
        ("sqlite:///tmp/m.db", ("sqlite", "", None)),
        ("file:///tmp/mlruns", ("file", "", None)),
    ],
)
def test_a_tracking_uri_parses_to_its_scheme_host_and_port(uri: str, parsed: tuple[str, str, int | None]) -> None:
    assert tuple(offline.parse_uri(uri)) == parsed


def test_credentials_in_a_uri_are_redacted_wherever_printed(fresh_allowlist: None) -> None:
    uri = "http://user:s3cret@mlflow.lab:5000/api"
    assert offline.redact(uri) == "http://user:***@mlflow.lab:5000/api"
    assert offline.redact("http://token@mlflow.lab/") == "http://token@mlflow.lab/"  # no password: nothing hidden
    said = offline.redact_in(f"GET {uri} failed (s3cret)", uri)
    assert said == "GET http://user:***@mlflow.lab:5000/api failed (***)"
    offline.install()
    for bad in (uri, "http://user:s3cret@mlflow.lab:٥٠٠٠/"):
        with pytest.raises(offline.NetworkRefused) as e:
            offline.check_url(bad, "--mlflow")
        assert "s3cret" not in str(e.value) and "user:***@" in str(e.value)


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("lab:٥٠٠٠", "the port must be a number from 1 to 65535"),  # was port 5000
        ("läb:5000", "is not a host name"),
        ("lab\x1b[2J:5000", "is not a host name"),
        ("[x]:5000", "is not an IPv6 address"),
        ("garbage", "expected HOST:PORT"),
    ],
)
def test_an_allowlist_entry_is_held_to_the_same_host_and_port_rules(entry: str, why: str) -> None:
    with pytest.raises(offline.AllowListError, match=why) as e:
        offline.parse_allowed(entry, "--allow-host")
    assert "\x1b" not in str(e.value)
