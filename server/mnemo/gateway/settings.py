"""The ``[gateway]`` table of ``mnemo.toml``: address, auth, lanes, sessions, agents, routes, channels.

Secrets are read from the environment first (``MNEMO_GATEWAY_TOKEN``, ``MNEMO_GATEWAY_PASSWORD``, and
each channel's ``*_env`` variable), then from the config file; never from the command line, where other
users of the machine could read them. Like the rest of the config, a bad key is reported and its default
is used: a broken table never stops the gateway, but a broken auth setting refuses a public bind.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

from mnemo.config import CONFIG_FILE, coerce_setting

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 18789
Role = Literal["guest", "user", "admin"]
ROLES: tuple[str, ...] = get_args(Role)
DmScope = Literal["main", "per-peer", "per-channel-peer"]
Reset = Literal["never", "daily", "idle"]
LOOPBACK_NETWORKS = ("127.0.0.0/8", "::1/128")
ROUTE_FIELDS = ("peer", "parent_thread", "guild", "team", "account", "channel")
"""The fields a route can match, most specific first: the order in which routes are tried."""


@dataclass
class AuthSettings:
    token: str = ""
    """Admin token (prefer the MNEMO_GATEWAY_TOKEN environment variable)."""
    password: str = ""
    """Shared password (prefer MNEMO_GATEWAY_PASSWORD); logs in as ``password_role``."""
    token_role: Role = "admin"
    password_role: Role = "user"
    max_failures: int = 5
    """Failed logins allowed per client address within ``failure_window_s`` before it is refused."""
    failure_window_s: float = 60.0
    pbkdf2_iterations: int = 100_000
    generated: bool = False
    """The token came from the gateway's own token file, not from the user's configuration."""

    @property
    def configured(self) -> bool:
        """Whether the user configured a secret (a generated token does not count for a public bind)."""
        return bool(self.token and not self.generated) or bool(self.password)


@dataclass
class SessionPolicy:
    dm_scope: DmScope = "per-channel-peer"
    """main: every direct message shares the agent's main session; per-peer: one per person across
    channels; per-channel-peer: one per person per channel."""
    reset: Reset = "never"
    """never: a session lives until /new or /reset; daily: a fresh session after ``reset_hour``;
    idle: a fresh session after ``idle_minutes`` without messages."""
    reset_hour: int = 4
    idle_minutes: int = 120


@dataclass
class AgentProfile:
    id: str
    sessions: SessionPolicy = field(default_factory=SessionPolicy)


@dataclass
class RouteRule:
    agent: str
    match: dict[str, str]
    """Field -> value; every field given must equal the message's (``channel`` may narrow any rule)."""

    def specificity(self) -> int:
        """Index of the most specific field matched (lower is more specific)."""
        return min(ROUTE_FIELDS.index(k) for k in self.match if k in ROUTE_FIELDS)


@dataclass
class MethodRules:
    """``[gateway.roles.<role>]``: methods added to (``allow``) and taken from (``deny``) the built-in role
    table; fnmatch patterns like ``"memory.*"``. Deny wins."""

    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


@dataclass
class GatewaySettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_concurrent: int = 4
    """Turns that may run at once across all sessions (each session runs one turn at a time)."""
    queue_limit: int = 32
    """Messages that may wait for one busy session; more are refused with a clear error."""
    steering: bool = False
    """A message for a session whose turn runs (and that nothing waits before) goes into that turn at its
    next safe point instead of waiting in the lane; its ``chat.send`` answers at once (``steered``)."""
    turn_timeout_s: float = 600.0
    max_frame_bytes: int = 1_000_000
    """Largest WebSocket message or HTTP body accepted; a bigger frame closes the connection."""
    max_query_chars: int = 4_096
    """Longest ``memory.search`` query (characters); a longer one is refused with INVALID_PARAMS."""
    max_message_chars: int = 32_000
    """Longest chat message (``chat.send`` text, any channel's message); longer ones are refused."""
    max_memory_calls_per_user: int = 2
    """Memory calls (search, get) one principal may have running at once; more get a busy error."""
    tls_cert: str = ""
    """PEM certificate (chain) for wss:// and https:// (relative paths: from the workspace)."""
    tls_key: str = ""
    """PEM private key of ``tls_cert`` (keep it mode 0600)."""
    require_tls: bool = True
    """A non-loopback host without ``tls_cert``/``tls_key`` is refused (set false behind a TLS proxy)."""
    allow_from: list[str] = field(default_factory=list)
    """Client networks (``"10.0.0.0/8"``, ``"127.0.0.1/32"``) allowed to connect (WebSocket, webhooks,
    every route); others get HTTP 403 before auth. Empty: anyone who can reach the port."""
    roles: dict[str, MethodRules] = field(default_factory=dict)
    auth: AuthSettings = field(default_factory=AuthSettings)
    agents: list[AgentProfile] = field(default_factory=lambda: [AgentProfile("main")])
    default_agent: str = "main"
    routes: list[RouteRule] = field(default_factory=list)
    channels: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"webchat": {"enabled": True}, "webhook": {"enabled": True}}
    )

    def agent(self, agent_id: str) -> AgentProfile:
        for profile in self.agents:
            if profile.id == agent_id:
                return profile
        return AgentProfile(agent_id)


_BOUNDS: dict[str, tuple[float, float]] = {
    "port": (0, 65535),
    "max_concurrent": (1, 1024),
    "queue_limit": (1, 100_000),
    "turn_timeout_s": (1.0, 86_400.0),
    "max_frame_bytes": (1_024, 64_000_000),
    "max_query_chars": (1, 1_000_000),
    "max_message_chars": (1, 10_000_000),
    "max_memory_calls_per_user": (1, 1_024),
    "max_failures": (1, 1_000),
    "failure_window_s": (1.0, 86_400.0),
    "reset_hour": (0, 23),
    "idle_minutes": (1, 525_600),
}
_NOT_SETTINGS = {"generated", "pbkdf2_iterations"}


def _fill(
    target: Any,
    table: Mapping[str, Any],
    where: str,
    problems: list[str],
    *,
    skip: frozenset[str] = frozenset(),
) -> None:
    """Set ``target``'s fields from ``table`` with mnemo.config's coercion: a bad or unknown key is reported
    and the field keeps its value."""
    hints = {k: v for k, v in get_type_hints(type(target)).items() if k not in _NOT_SETTINGS}
    for key, value in table.items():
        if key in skip:
            continue
        if key not in hints or not isinstance(getattr(target, key), str | int | float):
            known = [k for k in hints if isinstance(getattr(target, k), str | int | float)]
            problems.append(f"{where}.{key}: unknown setting (known: {', '.join(known)})")
            continue
        try:
            setattr(target, key, coerce_setting(f"{where}.{key}", value, hints[key], _BOUNDS.get(key)))
        except ValueError as exc:
            problems.append(f"{where}.{key}: {exc}; using {getattr(target, key)!r}")


def _session_policy(
    table: Mapping[str, Any], base: SessionPolicy, problems: list[str], where: str, skip: frozenset[str]
) -> SessionPolicy:
    policy = SessionPolicy(base.dm_scope, base.reset, base.reset_hour, base.idle_minutes)
    _fill(policy, table, where, problems, skip=skip)
    return policy


def gateway_settings_from_dict(
    raw: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> tuple[GatewaySettings, list[str]]:
    """Build settings from the parsed ``[gateway]`` table; problems name the key and the fallback."""
    env = os.environ if env is None else env
    problems: list[str] = []
    s = GatewaySettings()
    _fill(
        s,
        raw,
        "gateway",
        problems,
        skip=frozenset({"auth", "session", "agents", "routes", "channels", "allow_from", "roles"}),
    )
    _constraints(s, raw, problems)
    for name, table in (("auth", raw.get("auth", {})), ("session", raw.get("session", {}))):
        if not isinstance(table, dict):
            problems.append(f"gateway.{name}: expected a table like [gateway.{name}]; ignored")
    if isinstance(raw.get("auth"), dict):
        _fill(s.auth, raw["auth"], "gateway.auth", problems)
    s.auth.token = env.get("MNEMO_GATEWAY_TOKEN") or s.auth.token
    s.auth.password = env.get("MNEMO_GATEWAY_PASSWORD") or s.auth.password
    session = raw.get("session", {})
    base = _session_policy(
        session if isinstance(session, dict) else {},
        SessionPolicy(),
        problems,
        "gateway.session",
        frozenset(),
    )
    agents_raw = raw.get("agents", [])
    agents: list[AgentProfile] = []
    if isinstance(agents_raw, list):
        for i, item in enumerate(agents_raw):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
                problems.append(f"gateway.agents[{i}]: needs an id string; skipped")
                continue
            agents.append(
                AgentProfile(
                    item["id"],
                    _session_policy(
                        item, base, problems, f"gateway.agents[{i}]", frozenset({"id", "default"})
                    ),
                )
            )
            if item.get("default") is True:
                s.default_agent = item["id"]
    if not agents:
        agents = [AgentProfile("main", base)]
    if s.default_agent not in {a.id for a in agents}:
        s.default_agent = agents[0].id
    s.agents = agents

    for i, item in enumerate(raw.get("routes", []) if isinstance(raw.get("routes"), list) else []):
        where = f"gateway.routes[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("agent"), str):
            problems.append(f"{where}: needs an agent string; skipped")
            continue
        match = {k: str(v) for k, v in item.items() if k in ROUTE_FIELDS}
        unknown = sorted(set(item) - set(ROUTE_FIELDS) - {"agent"})
        if unknown:
            problems.append(f"{where}: unknown keys {', '.join(unknown)} (known: {', '.join(ROUTE_FIELDS)})")
        if not match:
            problems.append(f"{where}: matches nothing (give one of {', '.join(ROUTE_FIELDS)}); skipped")
            continue
        if item["agent"] not in {a.id for a in s.agents}:
            problems.append(f"{where}: unknown agent {item['agent']!r}; skipped")
            continue
        s.routes.append(RouteRule(item["agent"], match))

    channels_raw = raw.get("channels", {})
    if isinstance(channels_raw, dict):
        for name, table in channels_raw.items():
            if isinstance(table, dict):
                s.channels[name] = {"enabled": True, **s.channels.get(name, {}), **table}
            else:
                problems.append(f"gateway.channels.{name}: expected a table; ignored")
    return s, problems


def _networks(value: Any, problems: list[str]) -> list[str]:
    """``allow_from`` entries as normalised networks; a list given with no valid entry falls back to
    loopback only (fail closed: a typo must not open the gateway to everyone)."""
    if not isinstance(value, list):
        problems.append('gateway.allow_from: expected a list of networks like ["10.0.0.0/8"]; loopback only')
        return list(LOOPBACK_NETWORKS)
    found: list[str] = []
    for item in value:
        try:
            found.append(str(ipaddress.ip_network(str(item), strict=False)))
        except ValueError:
            problems.append(f"gateway.allow_from: {item!r} is not an address or network; skipped")
    if value and not found:
        problems.append("gateway.allow_from: no valid network; loopback only")
        return list(LOOPBACK_NETWORKS)
    return found


def _patterns(value: Any, where: str, problems: list[str]) -> list[str]:
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return list(value)
    problems.append(f"{where}: expected a list of method names or patterns; ignored")
    return []


def _constraints(s: GatewaySettings, raw: Mapping[str, Any], problems: list[str]) -> None:
    """``allow_from`` and ``[gateway.roles.*]`` (lists and tables, which ``_fill`` does not take)."""
    if "allow_from" in raw:
        s.allow_from = _networks(raw["allow_from"], problems)
    roles = raw.get("roles", {})
    if not isinstance(roles, dict):
        problems.append("gateway.roles: expected tables like [gateway.roles.user]; ignored")
        return
    for role, table in roles.items():
        where = f"gateway.roles.{role}"
        if role not in ROLES or not isinstance(table, dict):
            problems.append(f"{where}: expected a table for one of {', '.join(ROLES)}; ignored")
            continue
        unknown = sorted(set(table) - {"allow", "deny"})
        if unknown:
            problems.append(f"{where}: unknown keys {', '.join(unknown)} (known: allow, deny)")
        s.roles[role] = MethodRules(
            _patterns(table.get("allow", []), f"{where}.allow", problems),
            _patterns(table.get("deny", []), f"{where}.deny", problems),
        )


def load_gateway_settings(
    workspace: Path, env: Mapping[str, str] | None = None
) -> tuple[GatewaySettings, list[str]]:
    """Read the ``[gateway]`` table of ``workspace/mnemo.toml`` (defaults when absent)."""
    try:
        raw = tomllib.loads((workspace / CONFIG_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return gateway_settings_from_dict({}, env)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        settings, problems = gateway_settings_from_dict({}, env)
        return settings, [f"cannot be read ({exc}); gateway defaults used", *problems]
    table = raw.get("gateway", {})
    if not isinstance(table, dict):
        settings, problems = gateway_settings_from_dict({}, env)
        return settings, ["gateway: expected a table like [gateway]", *problems]
    return gateway_settings_from_dict(table, env)
