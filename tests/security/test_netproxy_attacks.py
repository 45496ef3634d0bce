"""Red-team of the egress proxy of ``policy.network_domains`` (:mod:`mnemo.policy.netproxy`).

Each attack talks to a :class:`FilteringProxy` on a Unix socket, as the in-sandbox forwarder does, with a
:class:`Recorder` standing in for the allowed host (pinned to 127.0.0.1): what the recorder received is
exactly what reached "the internet". Domain fronting (a TLS SNI or a ``Host`` header naming another
host than the one allowed), request smuggling, odd spellings of a host, slow clients, connection floods.
The sandbox-side attacks (DNS, UDP, raw sockets) are in ``test_network_allowlist.py``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemo.policy.netproxy import FilteringProxy, NetworkAllowlist, NetworkEvent

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """A loopback TCP server that keeps every byte it is sent (until 0.3 s of quiet) and answers 200."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.received: list[bytes] = []
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(0.3)
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except OSError:
            pass
        self.received.append(data)
        with contextlib.suppress(OSError):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        conn.close()

    @property
    def data(self) -> bytes:
        return b"".join(self.received)


@pytest.fixture
def upstream() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.listener.close()


ALLOW = NetworkAllowlist(
    ("allowed.test", "*.wild.test"), {"allowed.test": "127.0.0.1", "api.wild.test": "127.0.0.1"}
)


class Proxy:
    def __init__(self, path: Path, **options: float) -> None:
        self.path = path
        self.events: list[NetworkEvent] = []
        self.asked: list[str] = []
        self.proxy = FilteringProxy(ALLOW, path, self.events.append, resolve=self._resolve, **options)  # type: ignore[arg-type]

    def _resolve(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return ["127.0.0.1"]

    def connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(str(self.path))
        return s

    def ask(self, *parts: bytes, pause: float = 0.0) -> bytes:
        """Send ``parts`` (``pause`` seconds apart) and read the answer to the end."""
        with self.connect() as s:
            for part in parts:
                s.sendall(part)
                time.sleep(pause)
            return _read_all(s)


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    try:
        while chunk := s.recv(65536):
            chunks.append(chunk)
    except OSError:
        pass
    return b"".join(chunks)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    p = Proxy(tmp_path / "p.sock")
    with p.proxy:
        yield p


def client_hello(sni: str | None) -> bytes:
    """The ClientHello Python's TLS stack sends for ``server_hostname=sni`` (no SNI for None)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname=sni)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def raw_hello(sni: str | None, extensions: bytes = b"", record_size: int = 0) -> bytes:
    """A hand-built ClientHello; ``record_size`` splits the handshake over records of that size."""
    exts = b""
    if sni is not None:
        entry = b"\x00" + struct.pack("!H", len(sni)) + sni.encode()
        names = struct.pack("!H", len(entry)) + entry
        exts += struct.pack("!HH", 0, len(names)) + names
    exts += extensions
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    body += struct.pack("!H", len(exts)) + exts
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    size = record_size or len(handshake)
    chunks = [handshake[i : i + size] for i in range(0, len(handshake), size)]
    return b"".join(b"\x16\x03\x01" + struct.pack("!H", len(c)) + c for c in chunks)


def connect_line(target: str) -> bytes:
    return f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()


# -- 1. domain fronting: the TLS name and the Host header must be the host that was allowed ----------------
def test_a_tunnel_carries_tls_to_the_name_it_was_opened_for(proxy: Proxy, upstream: Recorder) -> None:
    hello = client_hello("allowed.test")
    answer = proxy.ask(connect_line(f"allowed.test:{upstream.port}"), hello)
    assert answer.startswith(b"HTTP/1.1 200")
    assert upstream.data == hello  # the ClientHello went through untouched
    assert [(e.host, e.allowed) for e in proxy.events] == [("allowed.test", True)]


@pytest.mark.parametrize(
    ("sni", "why"),
    [
        ("denied.test", b"denied.test"),  # fronting: another name on the same address
        ("api.wild.test", b"api.wild.test"),  # even an allowed one: the tunnel is for allowed.test
        (None, b"no server name"),  # no SNI: the server picks the site
    ],
)
def test_a_client_hello_naming_another_host_is_refused(
    proxy: Proxy, upstream: Recorder, sni: str | None, why: bytes
) -> None:
    answer = proxy.ask(connect_line(f"allowed.test:{upstream.port}"), client_hello(sni))
    assert answer.startswith(b"HTTP/1.1 200")  # the tunnel opened; then the hello was judged
    assert answer[answer.index(b"\r\n\r\n") + 4 :][:1] == b"\x15"  # a TLS alert record, then close
    assert upstream.data == b""  # not a byte reached the host
    refusal = proxy.events[-1]
    assert not refusal.allowed and "TLS" in refusal.reason and why.decode() in refusal.reason


def test_encrypted_client_hello_is_refused(proxy: Proxy, upstream: Recorder) -> None:
    ech = struct.pack("!HH", 0xFE0D, 4) + b"\x00\x00\x01\x00"  # the outer SNI would front for the inner
    answer = proxy.ask(connect_line(f"allowed.test:{upstream.port}"), raw_hello("allowed.test", ech))
    assert upstream.data == b"" and answer[answer.index(b"\r\n\r\n") + 4 :][:1] == b"\x15"
    assert "encrypted" in proxy.events[-1].reason


def test_plain_bytes_in_a_tunnel_are_refused(proxy: Proxy, upstream: Recorder) -> None:
    smuggled = b"GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n"
    answer = proxy.ask(connect_line(f"allowed.test:{upstream.port}"), smuggled)
    assert upstream.data == b"" and not proxy.events[-1].allowed
    assert b"denied.test" not in upstream.data and answer.startswith(b"HTTP/1.1 200")


def test_a_client_hello_in_pieces_and_records_is_read_whole(proxy: Proxy, upstream: Recorder) -> None:
    hello = raw_hello("ALLOWED.test.", record_size=40)  # spelled otherwise, over several records
    head = connect_line(f"allowed.test:{upstream.port}")
    answer = proxy.ask(head + hello[:3], hello[3:50], hello[50:], pause=0.05)
    assert answer.startswith(b"HTTP/1.1 200") and upstream.data == hello
    assert proxy.events[-1].allowed


def test_a_host_header_naming_another_host_is_refused(proxy: Proxy, upstream: Recorder) -> None:
    p = upstream.port
    fronted = proxy.ask(f"GET http://allowed.test:{p}/ HTTP/1.1\r\nHost: denied.test\r\n\r\n".encode())
    assert fronted.startswith(b"HTTP/1.1 403") and b"Host" in fronted
    twice = f"GET http://allowed.test:{p}/ HTTP/1.1\r\nHost: allowed.test\r\nHost: denied.test\r\n\r\n"
    assert proxy.ask(twice.encode()).startswith((b"HTTP/1.1 400", b"HTTP/1.1 403"))
    assert upstream.data == b""
    fine = proxy.ask(f"GET http://allowed.test:{p}/x HTTP/1.1\r\nHost: ALLOWED.test:{p}\r\n\r\n".encode())
    assert fine.endswith(b"ok") and upstream.data.startswith(b"GET /x HTTP/1.1\r\n")
    assert f"Host: allowed.test:{p}\r\n".encode() in upstream.data


@pytest.mark.parametrize(
    "header",
    [b"X-A: 1\r\n Host: denied.test", b"X-A: 1\rHost: denied.test", b"Host : denied.test", b"X-A: \x00"],
)
def test_headers_a_server_could_read_otherwise_are_refused(
    proxy: Proxy, upstream: Recorder, header: bytes
) -> None:
    request = f"GET http://allowed.test:{upstream.port}/ HTTP/1.1\r\nHost: allowed.test\r\n".encode()
    answer = proxy.ask(request + header + b"\r\n\r\n")
    assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 403")) and upstream.data == b""


# -- 3. smuggling: one request per connection, its body as long as it says ------------------------------
def test_a_second_request_in_the_same_packet_is_not_forwarded(proxy: Proxy, upstream: Recorder) -> None:
    first = f"GET http://allowed.test:{upstream.port}/a HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
    second = "GET http://denied.test/b HTTP/1.1\r\nHost: denied.test\r\n\r\n"
    answer = proxy.ask((first + second).encode())
    assert answer.endswith(b"ok") and b"denied.test" not in upstream.data
    assert upstream.data.count(b"GET ") == 1


def test_a_body_is_forwarded_to_its_length_and_no_further(proxy: Proxy, upstream: Recorder) -> None:
    head = f"POST http://allowed.test:{upstream.port}/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\n\r\n"
    smuggled = b"GET /admin HTTP/1.1\r\nHost: denied.test\r\n\r\n"
    answer = proxy.ask(head.encode() + b"hel", b"lo" + smuggled, pause=0.05)
    assert answer.endswith(b"ok") and upstream.data.endswith(b"\r\n\r\nhello")
    assert b"denied.test" not in upstream.data


@pytest.mark.parametrize(
    "framing",
    [
        b"Transfer-Encoding: chunked",
        b"Content-Length: 5\r\nContent-Length: 6",
        b"Content-Length: 5\r\nTransfer-Encoding: chunked",
        b"Content-Length: -1",
    ],
)
def test_ambiguous_or_chunked_bodies_are_refused(proxy: Proxy, upstream: Recorder, framing: bytes) -> None:
    head = f"POST http://allowed.test:{upstream.port}/ HTTP/1.1\r\nHost: allowed.test\r\n".encode()
    answer = proxy.ask(head + framing + b"\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: denied.test\r\n\r\n")
    assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 411")) and upstream.data == b""


# -- 2. the host as written: odd spellings are refused or normalised, never resolved when refused --------
@pytest.mark.parametrize(
    "target",
    [
        ".wild.test:443",  # an empty label still ends in .wild.test
        "a..wild.test:443",
        "evil.test%2f.wild.test:443",
        "allowed.test@denied.test:443",  # user info: no such thing in CONNECT
        "denied.test@allowed.test:443",
        "denied.test#allowed.test:443",
        "allowed.test:443/path",
        "allowed.test.denied.test:443",
        "127.0.0.1:443",
        "[::1]:443",
        "[::ffff:127.0.0.1]:443",
        "2130706433:443",  # 127.0.0.1 as a number
        "allowed.test:99999",
    ],
)
def test_odd_connect_targets_are_refused_unresolved(proxy: Proxy, upstream: Recorder, target: str) -> None:
    answer = proxy.ask(connect_line(target))
    assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 403")), answer
    assert proxy.asked == [] and upstream.data == b""


@pytest.mark.parametrize("spelling", ["ALLOWED.test", "allowed.test.", "Allowed.Test."])
def test_the_allowed_name_in_other_cases_and_with_a_root_dot(
    proxy: Proxy, upstream: Recorder, spelling: str
) -> None:
    answer = proxy.ask(connect_line(f"{spelling}:{upstream.port}"), client_hello("allowed.test"))
    assert answer.startswith(b"HTTP/1.1 200") and upstream.data.startswith(b"\x16\x03")


# -- 3. slow and many clients ---------------------------------------------------------------------------
def test_a_slow_client_is_dropped_and_blocks_no_one(tmp_path: Path, upstream: Recorder) -> None:
    p = Proxy(tmp_path / "p.sock", head_timeout_s=1.0)
    with p.proxy, p.connect() as slow:
        start = time.monotonic()
        slow.sendall(b"GET http://allowed.test/ HTTP/1.1\r\n")
        answered = p.ask(f"GET http://allowed.test:{upstream.port}/ HTTP/1.1\r\n\r\n".encode())
        assert answered.endswith(b"ok") and time.monotonic() - start < 1.0  # served meanwhile
        answer = b""
        while time.monotonic() - start < 5 and not answer:  # a byte every 0.2 s: never a whole head
            try:
                slow.sendall(b"X")
            except OSError:
                break
            time.sleep(0.2)
            slow.setblocking(False)
            try:
                answer = slow.recv(4096) or b"closed"
            except BlockingIOError:
                pass
            finally:
                slow.setblocking(True)
        assert answer.startswith((b"HTTP/1.1 408", b"closed")) and time.monotonic() - start < 3


def test_a_tunnel_that_never_says_hello_is_closed(tmp_path: Path, upstream: Recorder) -> None:
    p = Proxy(tmp_path / "p.sock", head_timeout_s=1.0)
    with p.proxy, p.connect() as s:
        start = time.monotonic()
        s.sendall(connect_line(f"allowed.test:{upstream.port}"))
        answer = _read_all(s)
        assert answer.startswith(b"HTTP/1.1 200") and time.monotonic() - start < 3
    assert upstream.data == b""


def test_connections_beyond_the_cap_are_refused(tmp_path: Path, upstream: Recorder) -> None:
    p = Proxy(tmp_path / "p.sock", max_connections=4)
    with p.proxy:
        held = [p.connect() for _ in range(4)]
        time.sleep(0.2)
        with p.connect() as extra:  # answered at once, before it says anything
            assert _read_all(extra).startswith(b"HTTP/1.1 503")
        for s in held:
            s.close()
        time.sleep(0.2)
        assert p.ask(connect_line(f"allowed.test:{upstream.port}"), client_hello("allowed.test")).startswith(
            b"HTTP/1.1 200"
        )
