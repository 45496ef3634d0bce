"""Challenge-response login, roles and the failed-login rate limit of the gateway.

No secret crosses the wire. A client asks for a challenge (a fresh single-use nonce, bound to its
connection) and answers with ``proof = HMAC-SHA256(key, "mnemo-gateway-v1|<method>|<nonce>")`` in hex,
where ``key`` is the token itself (method ``token``) or ``PBKDF2-HMAC-SHA256(password, salt,
iterations)`` (method ``password``; salt and iterations come with the challenge). :func:`client_proof`
computes it for clients and tests.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from mnemo.errors import MnemoError

from .settings import ROLES, AuthSettings

PROOF_CONTEXT = "mnemo-gateway-v1"
NONCE_TTL_S = 60.0

ANYONE = frozenset({"auth.challenge", "auth.login", "health"})
_GUEST = ANYONE | {"whoami", "chat.send"}
_USER = _GUEST | {"chat.history", "chat.feedback", "sessions.list", "memory.search", "memory.get"}
PERMISSIONS: dict[str, frozenset[str]] = {
    "guest": _GUEST,
    "user": _USER,
    "admin": _USER
    | {
        "sessions.reset",
        "sessions.archive",
        "routes.list",
        "routes.resolve",
        "channels.list",
        "status",
        "approvals.list",
        "approvals.resolve",
        "plugins.list",
        "plugins.reload",
    },
}
"""Methods each role may call. Guests chat in sessions that never see MEMORY.md or private recall."""


class AuthError(MnemoError):
    """A login that failed (wrong proof, expired or reused challenge, unknown method)."""


class RateLimited(MnemoError):
    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many failed logins from this address; retry in {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


def role_allows(role: str | None, method: str, table: dict[str, frozenset[str]] | None = None) -> bool:
    """Whether ``role`` may call ``method`` by ``table`` (default: the built-in :data:`PERMISSIONS`)."""
    return method in ((table or PERMISSIONS).get(role, ANYONE) if role else ANYONE)


def lower_role(granted: str, asked: str | None) -> str:
    """The role asked for when it is no higher than the one granted (a client may drop privileges)."""
    if asked is None or asked not in ROLES:
        return granted
    return asked if ROLES.index(asked) <= ROLES.index(granted) else granted


def derive_password_key(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)


def client_proof(method: str, secret: str, nonce: str, salt_hex: str = "", iterations: int = 0) -> str:
    """What a client sends to :meth:`Authenticator.login` for a challenge."""
    key = (
        derive_password_key(secret, bytes.fromhex(salt_hex), iterations)
        if method == "password"
        else secret.encode("utf-8")
    )
    return hmac.new(key, f"{PROOF_CONTEXT}|{method}|{nonce}".encode(), hashlib.sha256).hexdigest()


@dataclass
class Challenge:
    nonce: str
    issued: float


@dataclass
class FailureLimiter:
    """At most ``max_failures`` failed logins per address within ``window_s``; then refuse until the
    oldest failure leaves the window. Successes do not reset the count (no guessing between them)."""

    max_failures: int
    window_s: float
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def _recent(self, address: str, now: float) -> deque[float]:
        times = self._failures.setdefault(address, deque())
        while times and now - times[0] > self.window_s:
            times.popleft()
        return times

    def check(self, address: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        times = self._recent(address, now)
        if len(times) >= self.max_failures:
            raise RateLimited(self.window_s - (now - times[0]))

    def fail(self, address: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._recent(address, now).append(now)
        if len(self._failures) > 10_000:  # forget idle addresses rather than grow without bound
            for key in [k for k, v in self._failures.items() if not v][:5_000]:
                del self._failures[key]


class Authenticator:
    """Issues challenges and checks proofs against the configured token and password."""

    def __init__(self, settings: AuthSettings) -> None:
        self.settings = settings
        self.salt = secrets.token_bytes(16)
        self._password_key = (
            derive_password_key(settings.password, self.salt, settings.pbkdf2_iterations)
            if settings.password
            else b""
        )
        self.limiter = FailureLimiter(settings.max_failures, settings.failure_window_s)

    def methods(self) -> list[str]:
        return [m for m, on in (("token", self.settings.token), ("password", self.settings.password)) if on]

    def challenge(self) -> tuple[Challenge, dict[str, object]]:
        issued = Challenge(secrets.token_hex(32), time.monotonic())
        return issued, {
            "nonce": issued.nonce,
            "methods": self.methods(),
            "salt": self.salt.hex(),
            "iterations": self.settings.pbkdf2_iterations,
            "context": PROOF_CONTEXT,
        }

    def login(self, challenge: Challenge | None, method: str, proof: str, address: str) -> str:
        """The role granted for a valid proof; raises RateLimited or AuthError (counted as a failure)."""
        self.limiter.check(address)
        try:
            return self._verify(challenge, method, proof)
        except AuthError:
            self.limiter.fail(address)
            raise

    def _verify(self, challenge: Challenge | None, method: str, proof: str) -> str:
        if challenge is None:
            raise AuthError("ask for a challenge first (auth.challenge); each one is good for one login")
        if time.monotonic() - challenge.issued > NONCE_TTL_S:
            raise AuthError("the challenge expired; ask for a new one")
        if method == "token" and self.settings.token:
            key, role = self.settings.token.encode("utf-8"), self.settings.token_role
        elif method == "password" and self.settings.password:
            key, role = self._password_key, self.settings.password_role
        else:
            raise AuthError(f"login method {method!r} is not enabled (enabled: {', '.join(self.methods())})")
        expected = hmac.new(key, f"{PROOF_CONTEXT}|{method}|{challenge.nonce}".encode(), hashlib.sha256)
        if not isinstance(proof, str) or not hmac.compare_digest(expected.hexdigest(), proof.lower()):
            raise AuthError("wrong proof")
        return role


def default_token_file() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mnemo" / "gateway-token"


def ensure_token_file(path: Path) -> str:
    """The token in ``path``, created (mode 0600) with a random token when missing. Used when no secret is
    configured, so a loopback gateway still asks every client for proof (like Jupyter's token file)."""
    try:
        existing = path.read_text(encoding="utf-8").strip()
        mode = stat.S_IMODE(path.stat().st_mode)
        if existing and not mode & 0o077:
            return existing
        if existing:
            raise AuthError(f"{path} is readable by other users (mode {mode:o}); chmod 600 it or delete it")
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token
