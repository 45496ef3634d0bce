"""Gateway constraints from settings: per-role method lists, the client address allowlist, TLS.

- :func:`role_table`: the built-in role table (:data:`~.auth.PERMISSIONS`) with ``[gateway.roles.<role>]``
  ``allow`` patterns added and ``deny`` patterns taken away (deny wins; login methods stay for everyone).
- :class:`AddressFilter`: ``allow_from`` networks; an aiohttp middleware refuses every other client with
  HTTP 403 before any route (WebSocket, webhook, health) and before auth, and logs it.
- :func:`server_ssl_context`: ``tls_cert``/``tls_key`` as an ``ssl.SSLContext`` (TLS 1.2 or later).
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from aiohttp import web

from mnemo.errors import MnemoError

from .auth import ANYONE, PERMISSIONS
from .settings import MethodRules

log = logging.getLogger(__name__)

LOG_EVERY_S = 60.0
"""A refused address is logged at most once a minute (a flood must not flood the log)."""


class TlsSettingsError(MnemoError):
    """``tls_cert``/``tls_key`` given but unusable (missing, unreadable, not a matching pair)."""


def role_table(
    rules: dict[str, MethodRules], known: Iterable[str]
) -> tuple[dict[str, frozenset[str]], list[str]]:
    """The effective methods per role, and problems (patterns that match no known method)."""
    known = sorted(set(known))
    table = dict(PERMISSIONS)
    problems: list[str] = []
    for role, rule in rules.items():
        allowed = set(table.get(role, ANYONE))
        for kind, patterns in (("allow", rule.allow), ("deny", rule.deny)):
            for pattern in patterns:
                hits = {m for m in known if fnmatchcase(m, pattern)}
                if not hits:
                    problems.append(f"gateway.roles.{role}.{kind}: {pattern!r} matches no gateway method")
                if kind == "allow":
                    allowed |= hits
                else:
                    allowed -= hits - ANYONE  # everyone may still log in (and log in as less)
        table[role] = frozenset(allowed)
    return table, problems


class AddressFilter:
    """Which client addresses may talk to the gateway (``allow_from``; empty: all)."""

    def __init__(self, networks: Iterable[str]) -> None:
        self.networks = [ipaddress.ip_network(n, strict=False) for n in networks]
        self.refused = 0
        self._logged: dict[str, float] = {}

    def allows(self, address: str | None) -> bool:
        if not self.networks:
            return True
        try:
            ip = ipaddress.ip_address((address or "").split("%", 1)[0])
        except ValueError:
            return False  # a Unix socket or an unknown peer: not on any allowed network
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == net.version and ip in net for net in self.networks)

    def _note(self, address: str, path: str) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._logged.get(address, -LOG_EVERY_S) >= LOG_EVERY_S:
            if len(self._logged) > 10_000:
                self._logged.clear()
            self._logged[address] = now
            log.warning("refused %s from %s: not in gateway.allow_from", path, address)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not self.allows(request.remote):
            self._note(request.remote or "?", request.path)
            raise web.HTTPForbidden(text="this address may not use this gateway\n")
        return await handler(request)


def tls_paths(root: Path, cert: str, key: str) -> tuple[Path, Path] | None:
    """The certificate and key paths (relative ones from the workspace); None when TLS is off."""
    if not cert and not key:
        return None
    if not cert or not key:
        raise TlsSettingsError("gateway.tls_cert and gateway.tls_key go together: set both or neither")
    return tuple(  # type: ignore[return-value]
        p if p.is_absolute() else root / p for p in (Path(cert).expanduser(), Path(key).expanduser())
    )


def server_ssl_context(root: Path, cert: str, key: str) -> ssl.SSLContext | None:
    """An ssl.SSLContext serving ``cert`` with ``key``; None when neither is set."""
    paths = tls_paths(root, cert, key)
    if paths is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(paths[0], paths[1])
    except (OSError, ssl.SSLError) as exc:
        raise TlsSettingsError(
            f"cannot use gateway.tls_cert {paths[0]} with gateway.tls_key {paths[1]}: {exc}"
        ) from exc
    return context
