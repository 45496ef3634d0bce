"""The proxy's reading of one request head: strict, so that the host it checks is the host that is reached.

:mod:`mnemo.policy.netproxy` decides on the host of the request line. Whatever else in the head could
name another host to the server behind it is refused here, before anything is resolved or connected:

* a request line of anything but ``METHOD SP target SP HTTP/1.x``; a ``CONNECT`` target that is not a
  bare ``host[:port]`` (no user info, path, fragment); a host that is not a valid name or IP literal
  (``.example.com`` would end in ``.example.com``);
* a header line that a server could split otherwise (a folded line, a bare CR, a NUL, a space before the
  colon), two ``Host`` headers, or a ``Host`` header naming another host than the request line (the
  server would pick the site by it: domain fronting);
* a body whose length is not one plain ``Content-Length`` (``Transfer-Encoding``, two lengths): the
  proxy forwards exactly that many bytes and then nothing, so a second request hidden after the body
  never reaches the server.

The request sent on is rebuilt: origin-form path, the proxy's own ``Host`` (the checked host), no
hop-by-hop headers, ``Connection: close``.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
import urllib.parse
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")  # ASCII: write IDNs in punycode
_AUTHORITY = re.compile(r"(\[[0-9a-f:.]+\]|[^\[\]:@/?#]+)(?::([0-9]{1,5}))?")
_FIELD = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e\x80-\xff]*")
_VERSION = re.compile(r"HTTP/1\.[01]")
_HOP_BY_HOP = frozenset(
    {b"host", b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive", b"te", b"trailer"}
    | {b"upgrade"}  # a 101 would turn the one request into a two-way stream the proxy never reads
)


class Refusal(Exception):
    """A request the proxy answers itself, with ``status`` and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def normalize_host(host: str) -> str:
    """Lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().strip("[]").rstrip(".").lower()


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_host_name(name: str) -> bool:
    """A normalised DNS name of ASCII labels (no empty label, at most 253 characters)."""
    return 0 < len(name) <= 253 and all(LABEL.fullmatch(label) for label in name.split("."))


@dataclass(frozen=True)
class Request:
    """A checked request head: where it goes, and (for plain HTTP) what is sent on."""

    method: str
    host: str
    port: int
    path: str = ""
    version: str = "HTTP/1.1"
    headers: tuple[bytes, ...] = ()
    body_length: int = 0

    @property
    def is_tunnel(self) -> bool:
        return self.method == "CONNECT"

    def origin_form(self) -> bytes:
        """The request as the origin server gets it: origin-form path, our Host, one request."""
        kept = [h for h in self.headers if h.split(b":", 1)[0].lower() not in _HOP_BY_HOP]
        name = f"[{self.host}]" if ":" in self.host else self.host
        host = f"Host: {name}{'' if self.port == 80 else f':{self.port}'}".encode()
        lines = [f"{self.method} {self.path} {self.version}".encode("latin-1"), host, *kept]
        return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


def _checked_host(raw: str, target: str) -> str:
    host = normalize_host(raw)
    if ip_literal(host) is None and not is_host_name(host):
        raise Refusal(400, f"{target!r} does not name a valid host")
    return host


def parse_target(method: str, target: str) -> tuple[str, int, str]:
    """(host, port, origin-form path) of a proxy request; the path is '' for CONNECT."""
    if method == "CONNECT":
        found = _AUTHORITY.fullmatch(target.lower())
        if found is None:
            raise Refusal(400, f"CONNECT takes host:port, not {target!r}")
        host, port, path = found[1], int(found[2] or 443), ""
    else:
        url = urllib.parse.urlsplit(target)
        if url.scheme.lower() != "http" or not url.netloc:
            raise Refusal(400, "the proxy takes CONNECT host:port or an absolute http:// URL")
        try:
            port = url.port or 80
        except ValueError as exc:
            raise Refusal(400, f"bad port in {target!r}") from exc
        host, path = url.hostname or "", (url.path or "/") + (f"?{url.query}" if url.query else "")
    if not 0 < port < 65536:
        raise Refusal(400, f"bad port in {target!r}")
    return _checked_host(host, target), port, path


def _values(headers: list[bytes], name: bytes) -> list[str]:
    return [
        h.split(b":", 1)[1].strip().decode("latin-1") for h in headers if h.split(b":", 1)[0].lower() == name
    ]


def _body_length(headers: list[bytes]) -> int:
    if _values(headers, b"transfer-encoding"):
        raise Refusal(411, "a request body must have a Content-Length (Transfer-Encoding is not supported)")
    lengths = set(_values(headers, b"content-length"))
    if len(lengths) > 1 or not all(v.isascii() and v.isdigit() and len(v) <= 18 for v in lengths):
        raise Refusal(400, "the Content-Length is not one plain number")
    return int(lengths.pop()) if lengths else 0


def _check_host_header(headers: list[bytes], host: str) -> None:
    given = _values(headers, b"host")
    if len(given) > 1:
        raise Refusal(400, "the request has two Host headers")
    if given:
        named = _AUTHORITY.fullmatch(given[0].lower())
        if named is None or normalize_host(named[1]) != host:
            raise Refusal(403, f"the Host header names {given[0]!r}, not {host}: the request was refused")


def parse_request(head: bytes) -> Request:
    """The request a head asks for; :class:`Refusal` when it is malformed or could mean two things."""
    line, *headers = head.split(b"\r\n")
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or not _VERSION.fullmatch(parts[2]) or not parts[0].isalpha():
        raise Refusal(400, "malformed request line")
    method, target, version = parts[0].upper(), parts[1], parts[2]
    if not all(_FIELD.fullmatch(h) for h in headers):
        raise Refusal(400, "a malformed header line (folded, a bare CR or NUL, or a space before the colon)")
    host, port, path = parse_target(method, target)
    if method == "CONNECT":
        return Request(method, host, port)
    _check_host_header(headers, host)
    return Request(method, host, port, path, version, tuple(headers), _body_length(headers))


def recv_before(sock: socket.socket, deadline: float, size: int = 65536) -> bytes:
    """One ``recv`` that gives up at ``deadline`` (TimeoutError)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    sock.settimeout(left)
    return sock.recv(size)


def read_head(sock: socket.socket, deadline: float) -> tuple[bytes, bytes]:
    """(the head without its blank line, what followed it), read by ``deadline``."""
    buf, start = bytearray(), 0
    while (end := buf.find(b"\r\n\r\n", start)) < 0:
        start = max(0, len(buf) - 3)  # scan each byte once, however slowly the head comes
        if len(buf) > MAX_HEAD_BYTES:
            raise Refusal(431, "the request head is too large")
        try:
            chunk = recv_before(sock, deadline)
        except TimeoutError as exc:
            raise Refusal(408, "no complete request head in time") from exc
        if not chunk:
            raise EOFError("the client closed before sending a request")
        buf += chunk
    return bytes(buf[:end]), bytes(buf[end + 4 :])
