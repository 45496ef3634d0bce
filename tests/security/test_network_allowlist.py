"""Issue 18, point 6: ``policy.network_domains`` — a sandboxed command reaches only the listed domains.

Loopback HTTP(S) servers (``tests/security/conftest.py``) stand in for the allowed and the denied names; ``network_hosts`` pins the names
to 127.0.0.1 (the test-only resolver mapping), so nothing leaves the machine. Every command runs in the
real bubblewrap sandbox with its own network namespace, the filtering proxy outside it, and the
forwarder inside it. Skipped, loudly, where bwrap cannot start.
"""

from __future__ import annotations

import errno
import json
import socket
from pathlib import Path

import pytest

from mnemo.policy import AuditLog, load_policy, run_sandboxed
from mnemo.policy.approvals import ApprovalRequest, Choice
from mnemo.policy.gate import ToolGate
from mnemo.policy.netproxy import FilteringProxy, NetworkAllowlist, NetworkEvent
from tests.sandbox_support import bwrap_works as _bwrap_works
from tests.security.sites import Site

needs_bwrap = pytest.mark.skipif(
    not _bwrap_works(), reason="bubblewrap unavailable: apt-get install -y bubblewrap"
)
pytestmark = pytest.mark.timeout(60)

# Runs inside the sandbox: each probe's outcome as JSON on stdout.
PROBE = r"""
import http.client, json, os, socket, ssl, sys, urllib.error, urllib.parse, urllib.request

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]
    except Exception as e:
        return [0, type(e).__name__ + ": " + str(e)]

def tunnel(target):  # CONNECT host:port through the proxy, then HTTPS inside the tunnel
    host, port = target.rsplit(":", 1)
    proxy = urllib.parse.urlsplit(os.environ["https_proxy"])
    tls = ssl.create_default_context(cafile="ca.pem") if os.path.exists("ca.pem") else None
    c = http.client.HTTPSConnection(proxy.hostname, proxy.port, timeout=5, context=tls)
    c.set_tunnel(host, int(port))
    try:
        c.request("GET", "/tunnel")
        r = c.getresponse()
        return [r.status, r.read().decode()]
    except OSError as e:
        return [0, str(e)]

def direct(target):  # no proxy: a plain TCP connection
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        return "connected"
    except OSError as e:
        return e.errno

out = {}
for arg in sys.argv[1:]:
    kind, _, what = arg.partition("=")
    out[arg] = {"get": get, "tunnel": tunnel, "direct": direct}[kind](what)
print(json.dumps(out))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    (root / "probe.py").write_text(PROBE, encoding="utf-8")
    return root


ALLOWLIST = NetworkAllowlist(
    ("allowed.test", "*.wild.test"),
    {"allowed.test": "127.0.0.1", "api.wild.test": "127.0.0.1", "denied.test": "127.0.0.1"},
)


def probe(ws: Path, *args: str, allowlist: NetworkAllowlist = ALLOWLIST) -> tuple[dict, list[NetworkEvent]]:
    events: list[NetworkEvent] = []
    result = run_sandboxed(
        "python3 probe.py " + " ".join(args), ws, network_domains=allowlist, on_network=events.append
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), events


@needs_bwrap
def test_allowed_names_are_reached_through_the_proxy(
    ws: Path, sites: tuple[Site, Site], tls_site: Site
) -> None:
    allowed, _ = sites
    a, t = allowed.port, tls_site.port
    out, events = probe(
        ws, f"get=http://allowed.test:{a}/x", f"get=http://api.wild.test:{a}/y", f"tunnel=allowed.test:{t}"
    )
    assert out[f"get=http://allowed.test:{a}/x"] == [200, "allowed /x"]
    assert out[f"get=http://api.wild.test:{a}/y"] == [200, "allowed /y"]
    assert out[f"tunnel=allowed.test:{t}"] == [200, "tls /tunnel"]
    assert [(e.host, e.allowed) for e in events] == [
        ("allowed.test", True),
        ("api.wild.test", True),
        ("allowed.test", True),
    ]
    assert all(e.address == "127.0.0.1" for e in events)


@needs_bwrap
def test_other_names_ip_literals_and_the_hosts_loopback_are_refused(
    ws: Path, sites: tuple[Site, Site]
) -> None:
    allowed, denied = sites
    a, d = allowed.port, denied.port
    refused = [
        f"get=http://denied.test:{d}/",  # pinned to 127.0.0.1 too: the name decides, not the address
        f"get=http://wild.test:{a}/",  # *.wild.test covers subdomains only
        f"get=http://allowed.test.evil.test:{a}/",
        f"get=http://127.0.0.1:{a}/",  # an IP literal
        f"get=http://localhost:{a}/",
        f"get=http://[::1]:{a}/",
    ]
    out, events = probe(ws, *refused, f"tunnel=denied.test:{d}", f"tunnel=127.0.0.1:{a}")
    for arg in refused:
        status, body = out[arg]
        assert status == 403 and "not in policy.network_domains" in body, (arg, out[arg])
    assert out[f"tunnel=denied.test:{d}"][0] == 0 and "403" in out[f"tunnel=denied.test:{d}"][1]
    assert out[f"tunnel=127.0.0.1:{a}"][0] == 0 and "403" in out[f"tunnel=127.0.0.1:{a}"][1]
    assert len(events) == len(refused) + 2 and not any(e.allowed for e in events)
    assert {e.host for e in events} >= {"denied.test", "127.0.0.1", "localhost", "::1"}
    assert denied.hosts == [] and allowed.hosts == []  # nothing reached either server


@needs_bwrap
def test_direct_connections_have_no_route_out(ws: Path, sites: tuple[Site, Site]) -> None:
    allowed, _ = sites
    out, events = probe(ws, f"direct=127.0.0.1:{allowed.port}", "direct=192.0.2.1:80", "direct=::1:80")
    assert out[f"direct=127.0.0.1:{allowed.port}"] == errno.ECONNREFUSED  # the sandbox's own loopback
    assert out["direct=192.0.2.1:80"] == errno.ENETUNREACH  # no route: nothing is sent
    assert out["direct=::1:80"] in (errno.ECONNREFUSED, errno.EADDRNOTAVAIL)
    assert events == [] and allowed.hosts == []


@needs_bwrap
def test_without_an_allowlist_there_is_still_no_network(ws: Path, sites: tuple[Site, Site]) -> None:
    allowed, _ = sites
    result = run_sandboxed(f"python3 probe.py get=http://allowed.test:{allowed.port}/ && env", ws)
    assert "proxy" not in result.stdout.lower().split("\n", 1)[1]  # no proxy variables
    assert json.loads(result.stdout.split("\n", 1)[0])[f"get=http://allowed.test:{allowed.port}/"][0] == 0
    assert allowed.hosts == []


@needs_bwrap
def test_hidden_and_protected_paths_stay_unreadable_with_the_network_on(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    script = (
        f"cat {home}/.ssh/id_ed25519; echo home=$?; echo x >> MEMORY.md; echo memory=$?; "
        "touch /tmp/.mnemo-net/x; echo proxydir=$?; ls /tmp/.mnemo-net"
    )
    result = run_sandboxed(script, ws, network_domains=ALLOWLIST)
    assert "PRIVATE KEY" not in result.stdout
    lines = result.stdout.splitlines()
    assert "home=1" in lines and "memory=2" in lines and "proxydir=1" in lines  # all three refused
    assert sorted(lines[lines.index("proxydir=1") + 1 :]) == ["netforward.py", "proxy.sock"]
    assert (ws / "MEMORY.md").read_text(encoding="utf-8") == "# Memory\n"


def _ask(sock_path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(sock_path))
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_denied_names_are_never_resolved_and_private_answers_are_refused(tmp_path: Path) -> None:
    asked: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1", "10.1.2.3"]  # a listed name that points into this machine or the LAN

    events: list[NetworkEvent] = []
    allowlist = NetworkAllowlist(("listed.test",))
    with FilteringProxy(allowlist, tmp_path / "p.sock", events.append, resolve=resolver):
        denied = _ask(tmp_path / "p.sock", b"GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n")
        tunnel = _ask(tmp_path / "p.sock", b"CONNECT other.test:443 HTTP/1.1\r\n\r\n")
        private = _ask(tmp_path / "p.sock", b"CONNECT listed.test:443 HTTP/1.1\r\n\r\n")
        garbage = _ask(tmp_path / "p.sock", b"GET /relative HTTP/1.1\r\n\r\n")
    assert denied.startswith(b"HTTP/1.1 403") and tunnel.startswith(b"HTTP/1.1 403")
    assert private.startswith(b"HTTP/1.1 403") and b"no public address" in private
    assert garbage.startswith(b"HTTP/1.1 400")
    assert asked == ["listed.test"]  # other.test was refused by name, never looked up
    assert [(e.host, e.allowed) for e in events] == [
        ("other.test", False),
        ("other.test", False),
        ("listed.test", False),
    ]


def test_an_unrecorded_connection_is_refused(tmp_path: Path) -> None:
    def broken_audit(event: NetworkEvent) -> None:
        raise OSError("disk full")

    allowlist = NetworkAllowlist(("listed.test",), {"listed.test": "127.0.0.1"})
    with FilteringProxy(allowlist, tmp_path / "p.sock", broken_audit):
        answer = _ask(tmp_path / "p.sock", b"CONNECT listed.test:9 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"could not be recorded" in answer


def test_allowlist_matching() -> None:
    allow = NetworkAllowlist(("example.com", "*.pythonhosted.org", "192.0.2.7"))
    assert allow.allows("example.com") and allow.allows("EXAMPLE.com.")
    assert not allow.allows("www.example.com") and not allow.allows("example.com.evil.net")
    assert allow.allows("files.pythonhosted.org") and not allow.allows("pythonhosted.org")
    assert not allow.allows("evilpythonhosted.org")
    assert allow.allows("192.0.2.7") and not allow.allows("192.0.2.8")


def test_settings_are_read_and_bad_entries_reported(tmp_path: Path) -> None:
    (tmp_path / "mnemo.toml").write_text(
        "[policy]\n"
        'network_domains = ["PyPI.org.", "*.pythonhosted.org", "*.com", "bad domain", "*"]\n'
        'network_hosts = {"Api.Test" = "127.0.0.1", "x.test" = "not-an-ip"}\n',
        encoding="utf-8",
    )
    problems: list[str] = []
    cfg = load_policy(tmp_path, problems)
    assert cfg.network_domains == ["pypi.org", "*.pythonhosted.org"]
    assert cfg.network_hosts == {"api.test": "127.0.0.1"}
    assert len(problems) == 4 and any("*.com" in p for p in problems)
    allowlist = cfg.network_allowlist()
    assert allowlist is not None and allowlist.allows("files.pythonhosted.org")
    (tmp_path / "mnemo.toml").write_text("[policy]\nnetwork = false\n", encoding="utf-8")
    assert load_policy(tmp_path).network_allowlist() is None


class AllowOnce:
    def ask(self, request: ApprovalRequest) -> Choice:
        request.resolution = "test"
        return "allow_once"


@needs_bwrap
def test_the_gate_runs_exec_behind_the_allowlist_and_audits_each_connection(
    ws: Path, tmp_path: Path, sites: tuple[Site, Site]
) -> None:
    allowed, denied = sites
    (ws / "mnemo.toml").write_text(
        '[policy]\nnetwork_domains = ["allowed.test"]\n'
        'network_hosts = {"allowed.test" = "127.0.0.1", "denied.test" = "127.0.0.1"}\n',
        encoding="utf-8",
    )
    audit = AuditLog(ws / ".mnemo" / "audit.jsonl", key_path=tmp_path / "keys" / "audit.key")
    gate = ToolGate(ws, load_policy(ws), audit, AllowOnce())
    command = (
        f"python3 probe.py get=http://allowed.test:{allowed.port}/ok get=http://denied.test:{denied.port}/"
    )
    outcome = gate.call("s1", "exec", {"command": command})
    assert outcome.ok, outcome.output
    out = json.loads(outcome.output)
    assert out[f"get=http://allowed.test:{allowed.port}/ok"] == [200, "allowed /ok"]
    assert out[f"get=http://denied.test:{denied.port}/"][0] == 403
    network = [e["data"] for e in audit.entries() if e["data"].get("tool") == "network"]
    assert [(n["host"], n["decision"], n["session"]) for n in network] == [
        ("allowed.test", "allow", "s1"),
        ("denied.test", "deny", "s1"),
    ]
    assert network[1]["rule"] == "policy.network_domains" and audit.verify().ok
    assert denied.hosts == []


def test_security_audit_flags_a_name_pinned_to_this_machine(tmp_path: Path) -> None:
    from mnemo.security.checks import check_policy

    (tmp_path / "mnemo.toml").write_text(
        '[policy]\nnetwork = true\nnetwork_domains = ["*.corp.test", "example.org"]\n'
        'network_hosts = {"db.corp.test" = "127.0.0.1", "example.org" = "93.184.216.34"}\n',
        encoding="utf-8",
    )
    findings = check_policy(tmp_path, load_policy(tmp_path), [])
    ids = {f.id: f for f in findings}
    assert "policy.network" not in ids  # the allowlist, not the whole network
    pinned = ids["policy.network-host-private"]
    assert pinned.severity == "warn" and "db.corp.test" in pinned.message and "own services" in pinned.message
    assert sum(f.id == "policy.network-host-private" for f in findings) == 1  # the public pin is fine
