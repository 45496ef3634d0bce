"""Loopback HTTP and HTTPS servers standing in for the names of a network allowlist."""

from __future__ import annotations

import http.server
import ssl


class Site(http.server.ThreadingHTTPServer):
    """A loopback HTTP(S) server standing in for one name; it remembers each request's Host header."""

    def __init__(self, label: str, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.label = label
        self.hosts: list[str] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Site

    def do_GET(self) -> None:
        self.server.hosts.append(self.headers.get("Host", ""))
        body = f"{self.server.label} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass
