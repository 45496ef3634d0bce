"""The network allowlist of the exec sandbox: a filtering HTTP/HTTPS proxy outside, on a Unix socket.

With ``policy.network_domains`` a sandboxed command still gets its own network namespace (loopback
only, no route anywhere). mnemo runs a :class:`FilteringProxy` for the length of the command, listening
on a Unix socket in a private temporary folder that bubblewrap binds read-only into the sandbox at
:data:`INSIDE`; :mod:`mnemo.policy.netforward`, started in the sandbox before the command, relays
``127.0.0.1:3128`` to it, and ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` (and the lower-case forms)
point there. So curl, pip, git, npm and Python's urllib reach the network only through the proxy, which:

* reads one request head (``CONNECT host:port`` for HTTPS and any other TLS, or an absolute
  ``http://`` URL), strictly (:mod:`mnemo.policy.nethttp`: no second reading of the host, no ``Host``
  header naming another one), within ``head_timeout_s``, and checks the host against the allowlist
  (``example.com`` exactly, ``*.example.com`` for its subdomains) *before* it resolves anything: a refused
  name is never looked up;
* refuses everything else with ``403`` (or ``400``, ``408``, ``411``, ``503``) and the reason, and
  reports it (:class:`NetworkEvent`, audited by the gate);
* refuses an IP literal not listed as such, and a listed name whose addresses are not public
  (loopback, private, link-local: this machine's services, the cloud metadata endpoint) unless the
  name is pinned in ``policy.network_hosts`` (name -> address: for tests, and to pin an intranet host);
* connects to the address it resolved itself; a tunnel then carries TLS only, and only once its first
  ClientHello names the CONNECT host (:mod:`mnemo.policy.nettls`: no domain fronting by SNI, no ECH);
  a plain request goes on as one request, its body to its ``Content-Length`` and nothing after it.

A program that ignores the proxy variables gets nowhere: there is no route out of the namespace.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.policy import netforward, nettls
from mnemo.policy.nethttp import (
    Refusal,
    Request,
    ip_literal,
    is_host_name,
    normalize_host,
    parse_request,
    read_head,
)

__all__ = ["FilteringProxy", "NetworkAllowlist", "NetworkEvent", "check_domain", "normalize_host"]

log = logging.getLogger(__name__)

INSIDE = "/tmp/.mnemo-net"
"""Where the proxy's folder (its socket and the forwarder) appears inside the sandbox."""
PROXY_PORT = 3128
SOCKET_NAME = "proxy.sock"
_PHRASES = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    411: "Length Required",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
Resolver = Callable[[str, int], list[str]]


def check_domain(pattern: str) -> str:
    """A ``network_domains`` entry, normalised; ValueError when it is not a name, ``*.name`` or an IP."""
    name = normalize_host(pattern)
    bare = name[2:] if name.startswith("*.") else name
    if (literal := ip_literal(bare)) is not None and bare == name:
        return str(literal)
    labels = bare.split(".")
    if "*" in bare or not is_host_name(bare):
        raise ValueError(f"{pattern!r} is not a domain name or *.domain")
    if name.startswith("*.") and len(labels) < 2:
        raise ValueError(f"{pattern!r} would allow a whole top-level domain")
    return name


@dataclass(frozen=True)
class NetworkAllowlist:
    """The domains a sandboxed command may reach, and names pinned to addresses."""

    domains: tuple[str, ...]
    hosts: Mapping[str, str] = field(default_factory=dict)
    """Pinned name -> address, used instead of DNS (may be loopback or private: tests, intranet hosts)."""

    def allows(self, host: str) -> bool:
        name = normalize_host(host)
        literal = ip_literal(name)
        if literal is not None:
            return str(literal) in self.domains
        return any(name.endswith(d[1:]) if d.startswith("*.") else name == d for d in self.domains if d)


@dataclass(frozen=True)
class NetworkEvent:
    """One connection the proxy was asked for: what was decided and why (the gate audits it)."""

    host: str
    port: int
    method: str
    allowed: bool
    reason: str
    address: str = ""

    def to_audit(self, session: str) -> dict[str, Any]:
        """The audit log's ``decision`` entry (tool ``network``)."""
        return {
            "session": session,
            "tool": "network",
            "decision": "allow" if self.allowed else "deny",
            "rule": "policy.network_domains",
            "reason": self.reason,
            "host": self.host,
            "port": self.port,
            "method": self.method,
            **({"address": self.address} if self.address else {}),
        }


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class FilteringProxy:
    """The allowlisting proxy on a Unix socket: a thread per connection, at most ``max_connections`` at
    once (more get ``503``), a request head (and a tunnel's ClientHello) due within ``head_timeout_s``;
    all closed by :meth:`close`."""

    def __init__(
        self,
        allowlist: NetworkAllowlist,
        socket_path: Path,
        on_event: Callable[[NetworkEvent], None] | None = None,
        *,
        resolve: Resolver = _resolve,
        connect_timeout_s: float = 10.0,
        head_timeout_s: float = 10.0,
        max_connections: int = 128,
    ) -> None:
        self.allowlist = allowlist
        self.socket_path = socket_path
        self.on_event = on_event
        self.resolve = resolve
        self.connect_timeout_s = connect_timeout_s
        self.head_timeout_s = head_timeout_s
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def __enter__(self) -> FilteringProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        listener.listen(64)
        listener.settimeout(0.5)  # so close() is noticed even where shutdown does not wake accept
        self._listener = listener
        threading.Thread(target=self._accept, name="mnemo-netproxy", daemon=True).start()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            live = [*self._open, *([self._listener] if self._listener else [])]
            self._open.clear()
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            if self._closed.is_set():
                sock.close()
                raise OSError("the proxy is closed")
            self._open.add(sock)

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                _answer(client, 503, f"more than {self.max_connections} connections at once")
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    # -- one connection -------------------------------------------------------------------------------
    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            self._track(client)
            head, rest = read_head(client, time.monotonic() + self.head_timeout_s)
            request = parse_request(head)
            upstream = self._open_upstream(request)
            if request.is_tunnel:
                self._tunnel(client, upstream, request, rest)
            else:
                self._forward(client, upstream, request, rest)
        except Refusal as refusal:
            _answer(client, refusal.status, refusal.reason)
        except (OSError, EOFError) as exc:
            log.debug("proxy connection ended: %s", exc)
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    sock.close()
            self._slots.release()

    def _open_upstream(self, request: Request) -> socket.socket:
        host, port, method = request.host, request.port, request.method
        if not self.allowlist.allows(host):  # decided on the name: a refused one is never resolved
            self._report(NetworkEvent(host, port, method, False, "not in policy.network_domains"))
            raise Refusal(403, f"{host} is not in policy.network_domains; the connection was refused")
        address = self._address(host, port, method)
        self._report(NetworkEvent(host, port, method, True, "in policy.network_domains", address))
        try:
            upstream = socket.create_connection((address, port), timeout=self.connect_timeout_s)
        except OSError as exc:
            raise Refusal(502, f"cannot connect to {host}:{port}: {exc}") from exc
        self._track(upstream)
        upstream.settimeout(None)
        return upstream

    def _tunnel(self, client: socket.socket, upstream: socket.socket, request: Request, rest: bytes) -> None:
        """Open the tunnel, and forward it once its first ClientHello names the CONNECT host."""
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        try:
            raw, hello = nettls.read_client_hello(client, rest, time.monotonic() + self.head_timeout_s)
            _check_server_name(nettls.server_name(hello), request.host)
        except nettls.TlsRefusal as refusal:
            with contextlib.suppress(Refusal):  # refused either way
                self._report(NetworkEvent(request.host, request.port, request.method, False, str(refusal)))
            with contextlib.suppress(OSError):
                client.sendall(nettls.ACCESS_DENIED)
            return
        client.settimeout(None)
        upstream.sendall(raw)
        netforward.splice(client, upstream)

    def _forward(self, client: socket.socket, upstream: socket.socket, request: Request, rest: bytes) -> None:
        """One plain HTTP request, its body to its length and nothing after it; the answer back."""
        client.settimeout(None)
        upstream.sendall(request.origin_form())
        back = threading.Thread(target=netforward.pipe, args=(upstream, client), daemon=True)
        back.start()  # now: an ``Expect: 100-continue`` answer reaches the client before its body is sent
        left, chunk = request.body_length, rest[: request.body_length]
        while chunk:
            upstream.sendall(chunk)
            left -= len(chunk)
            chunk = client.recv(min(65536, left)) if left else b""
        back.join()

    def _address(self, host: str, port: int, method: str) -> str:
        pinned = self.allowlist.hosts.get(host)
        if pinned:
            return pinned
        if ip_literal(host) is not None:
            return host  # listed as such in network_domains
        try:
            found = self.resolve(host, port)
        except OSError as exc:
            raise Refusal(502, f"cannot resolve {host}: {exc}") from exc
        public = [a for a in found if (ip := ip_literal(a)) is not None and ip.is_global]
        if not public:
            why = f"{host} resolves to no public address ({', '.join(found) or 'none'})"
            self._report(NetworkEvent(host, port, method, False, why))
            raise Refusal(403, why + "; pin it in policy.network_hosts to reach it")
        return public[0]

    def _report(self, event: NetworkEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception as exc:  # an unrecorded connection is a refused one
            log.error("network event not recorded (%s): refusing %s", exc, event.host)
            raise Refusal(403, f"the connection could not be recorded ({exc})") from exc


def _check_server_name(name: str | None, host: str) -> None:
    """The ClientHello must name the CONNECT host (and none for an IP literal, as clients send none)."""
    expected = None if ip_literal(host) is not None else host
    if name is None and expected is not None:
        raise nettls.TlsRefusal("the TLS ClientHello has no server name (SNI): the site cannot be checked")
    if name is not None and normalize_host(name) != expected:
        raise nettls.TlsRefusal(f"the TLS ClientHello asks for {name!r}, not {host}")


def _answer(sock: socket.socket, status: int, reason: str) -> None:
    body = f"mnemo sandbox proxy: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {_PHRASES.get(status, 'Error')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        sock.settimeout(5)
        sock.sendall(head.encode() + body)


# -- wiring into bubblewrap -----------------------------------------------------------------------------
@dataclass(frozen=True)
class NetWiring:
    """What the sandbox adds for a filtered network: a bind, the forwarder before the command, the env."""

    binds: tuple[str, ...]
    prefix: tuple[str, ...]
    env: dict[str, str]


def forwarder_python(hidden: str | None) -> str | None:
    """A Python the sandbox can see (``hidden``: the folder hidden inside it), for the forwarder."""
    candidates = [os.path.realpath(sys.executable)]
    for folder in ("/usr/bin", "/usr/local/bin", "/bin"):
        candidates.append(os.path.realpath(os.path.join(folder, "python3")))
    visible = [p for p in candidates if hidden is None or not p.startswith(hidden.rstrip("/") + "/")]
    return next((p for p in visible if os.path.isfile(p) and os.access(p, os.X_OK)), None)


def proxy_env(port: int = PROXY_PORT) -> dict[str, str]:
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    return {**dict.fromkeys(names, url), **dict.fromkeys((n.lower() for n in names), url)}


@contextlib.contextmanager
def confined(
    allowlist: NetworkAllowlist, on_event: Callable[[NetworkEvent], None] | None, python: str
) -> Iterator[NetWiring]:
    """A running proxy in a private folder, and how to reach it from the sandbox, for one command."""
    with tempfile.TemporaryDirectory(prefix="mnemo-net-") as tmp:  # mode 0700
        folder = Path(tmp)
        (folder / "netforward.py").write_bytes(Path(netforward.__file__).read_bytes())
        with FilteringProxy(allowlist, folder / SOCKET_NAME, on_event):
            yield NetWiring(
                binds=("--ro-bind", str(folder), INSIDE),
                prefix=(
                    python,
                    "-I",
                    "-S",
                    f"{INSIDE}/netforward.py",
                    str(PROXY_PORT),
                    f"{INSIDE}/{SOCKET_NAME}",
                ),
                env=proxy_env(),
            )
