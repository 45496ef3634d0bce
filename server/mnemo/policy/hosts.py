"""Whether a host is this machine only: one answer for the gateway's bind check, the security audit and
the chat provider (each had its own: one resolved names, one knew four spellings, one neither)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


def is_loopback_host(host: str, *, resolve: bool = False) -> bool:
    """``localhost`` (and ``*.localhost``), or a loopback address (``127.0.0.0/8``, ``::1``; brackets
    allowed). ``resolve``: a name counts when every address it resolves to is loopback (a bind check);
    without it names are never looked up (an audit or a URL check reads the setting as written)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not resolve or not host:
        return False
    try:
        found = socket.getaddrinfo(host, None)
        return bool(found) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in found)
    except (OSError, ValueError):
        return False


def url_is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine only (no lookup)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return host is not None and is_loopback_host(host)
