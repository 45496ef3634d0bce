"""The first TLS ClientHello of a proxy tunnel, read so that the proxy can check which site it names.

A ``CONNECT allowed.example:443`` tunnel goes to an address of ``allowed.example``; but a CDN or shared
host there serves many sites, and picks one by the ClientHello's server name (SNI). Without a look at it
a command could open a tunnel to an allowed name and ask the same front end for any other site (domain
fronting). :mod:`mnemo.policy.netproxy` therefore reads the whole first ClientHello (across TCP reads
and TLS records, bounded in size and time) before it forwards a byte, and refuses a tunnel whose
ClientHello:

* is not TLS at all (a tunnel carries TLS only: plain bytes would be an HTTP request the proxy never saw);
* names no server, or another server than the CONNECT host (an IP literal target: no name, as clients
  send none for an address);
* carries Encrypted Client Hello (or its ESNI draft), whose hidden inner name could be any site;
* is ambiguous: two server-name extensions or two names.

The refusal is a TLS ``access_denied`` alert (the client already has its ``200``); the proxy reports the
reason. Only the first ClientHello is read: the rest of the tunnel is end-to-end encrypted.
"""

from __future__ import annotations

import socket
import struct
import time

MAX_HELLO_BYTES = 64 * 1024
"""A ClientHello with post-quantum key shares is ~2 KiB; anything near this is not a client's hello."""
ACCESS_DENIED = b"\x15\x03\x03\x00\x02\x02\x31"
"""A fatal ``access_denied`` alert record: what the client's TLS stack reports."""
_HANDSHAKE, _CLIENT_HELLO, _SERVER_NAME = 0x16, 0x01, 0x0000
_HIDDEN_NAME = frozenset({0xFE0D, 0xFFCE, *range(0xFE08, 0xFE0D)})  # ECH (and its drafts), ESNI


class TlsRefusal(Exception):
    """The tunnel's first bytes are not a ClientHello the proxy can let through; the reason says why."""


def _recv(sock: socket.socket, deadline: float) -> bytes:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TlsRefusal("no TLS ClientHello in time")
    sock.settimeout(left)
    try:
        data = sock.recv(65536)
    except TimeoutError as exc:
        raise TlsRefusal("no TLS ClientHello in time") from exc
    if not data:
        raise EOFError("the client closed the tunnel before its ClientHello")
    return data


def read_client_hello(sock: socket.socket, first: bytes, deadline: float) -> tuple[bytes, bytes]:
    """(the raw bytes read, to forward as they are; the ClientHello message) from ``first`` then ``sock``.

    Raises :class:`TlsRefusal` (not TLS, too large, too slow) or :class:`EOFError` (the client left)."""
    raw = bytearray(first)
    message = bytearray()
    at = 0  # where the next record starts in raw
    while len(message) < 4 or len(message) < 4 + int.from_bytes(message[1:4], "big"):
        if len(raw) > MAX_HELLO_BYTES:
            raise TlsRefusal("the TLS ClientHello is too large")
        if len(raw) < at + 5:
            raw += _recv(sock, deadline)
            continue
        kind, length = raw[at], struct.unpack_from("!H", raw, at + 3)[0]
        if kind != _HANDSHAKE or raw[at + 1] != 3 or length == 0 or length > 16384 + 2048:
            raise TlsRefusal("the tunnel does not start with a TLS ClientHello (it carries TLS only)")
        if len(raw) < at + 5 + length:
            raw += _recv(sock, deadline)
            continue
        message += raw[at + 5 : at + 5 + length]
        at += 5 + length
        if message[0] != _CLIENT_HELLO:
            raise TlsRefusal("the tunnel does not start with a TLS ClientHello (it carries TLS only)")
    return bytes(raw), bytes(message[: 4 + int.from_bytes(message[1:4], "big")])


def _extensions(message: bytes) -> list[tuple[int, bytes]]:
    """The ClientHello's extensions, in order; ValueError when the message is cut short."""
    body = memoryview(message)[4:]
    at = 2 + 32  # legacy_version, random
    for size_bytes in (1, 2, 1):  # session id, cipher suites, compression methods
        at += size_bytes + int.from_bytes(body[at : at + size_bytes], "big")
    if at + 2 > len(body):
        if at > len(body):
            raise ValueError("cut short")
        return []  # a hello without extensions (SSL 3 style)
    end = at + 2 + int.from_bytes(body[at : at + 2], "big")
    if end > len(body):
        raise ValueError("cut short")
    found, at = [], at + 2
    while at + 4 <= end:
        kind, size = struct.unpack_from("!HH", body, at)
        if at + 4 + size > end:
            raise ValueError("cut short")
        found.append((kind, bytes(body[at + 4 : at + 4 + size])))
        at += 4 + size
    return found


def _names(data: bytes) -> list[str]:
    names, at = [], 2
    while at + 3 <= len(data):
        kind, size = data[at], int.from_bytes(data[at + 1 : at + 3], "big")
        if kind == 0:
            names.append(data[at + 3 : at + 3 + size].decode("latin-1"))
        at += 3 + size
    return names


def server_name(message: bytes) -> str | None:
    """The ClientHello's one server name (None: none). Raises :class:`TlsRefusal` when it hides or
    doubles it, or the message is malformed."""
    try:
        extensions = _extensions(message)
    except ValueError as exc:
        raise TlsRefusal("the TLS ClientHello is malformed") from exc
    if any(kind in _HIDDEN_NAME for kind, _ in extensions):
        raise TlsRefusal("the TLS ClientHello is encrypted (ECH): the site it asks for cannot be checked")
    named = [data for kind, data in extensions if kind == _SERVER_NAME]
    names = [name for data in named for name in _names(data)]
    if len(named) > 1 or len(names) > 1:
        raise TlsRefusal("the TLS ClientHello names more than one server")
    return names[0] if names else None
