"""The ``[gateway]`` table of ``mnemo.toml``: address, auth, lanes, sessions, agents, routes, channels.

Secrets are read from the environment first (``MNEMO_GATEWAY_TOKEN``, ``MNEMO_GATEWAY_PASSWORD``, and
each channel's ``*_env`` variable), then from the config file; never from the command line, where other
users of the machine could read them. Like the rest of the config, a bad key is reported and its default
is used: a broken table never stops the gateway, but a broken auth setting refuses a public bind.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.config import CONFIG_FILE

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 18789
ROLES = ("guest", "user", "admin")
DM_SCOPES = ("main", "per-peer", "per-channel-peer")
RESETS = ("never", "daily", "idle")
ROUTE_FIELDS = ("peer", "parent_thread", "guild", "team", "account", "channel")
"""The fields a route can match, most specific first: the order in which routes are tried."""


@dataclass
class AuthSettings:
    token: str = ""
    """Admin token (prefer the MNEMO_GATEWAY_TOKEN environment variable)."""
    password: str = ""
    """Shared password (prefer MNEMO_GATEWAY_PASSWORD); logs in as ``password_role``."""
    token_role: str = "admin"
    password_role: str = "user"
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
    dm_scope: str = "per-channel-peer"
    """main: every direct message shares the agent's main session; per-peer: one per person across
    channels; per-channel-peer: one per person per channel."""
    reset: str = "never"
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
class GatewaySettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_concurrent: int = 4
    """Turns that may run at once across all sessions (each session runs one turn at a time)."""
    queue_limit: int = 32
    """Messages that may wait for one busy session; more are refused with a clear error."""
    turn_timeout_s: float = 600.0
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


def _take(
    table: Mapping[str, Any], key: str, kind: type, default: Any, problems: list[str], where: str
) -> Any:
    value = table.get(key, default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        problems.append(f"{where}.{key}: expected {kind.__name__}, got {value!r}; using {default!r}")
        return default
    return value


def _choice(value: str, choices: tuple[str, ...], default: str, problems: list[str], where: str) -> str:
    if value in choices:
        return value
    problems.append(f"{where}: expected one of {', '.join(choices)}, got {value!r}; using {default!r}")
    return default


def _session_policy(
    table: Mapping[str, Any], base: SessionPolicy, problems: list[str], where: str
) -> SessionPolicy:
    policy = SessionPolicy(base.dm_scope, base.reset, base.reset_hour, base.idle_minutes)
    policy.dm_scope = _choice(
        _take(table, "dm_scope", str, base.dm_scope, problems, where),
        DM_SCOPES,
        base.dm_scope,
        problems,
        where,
    )
    policy.reset = _choice(
        _take(table, "reset", str, base.reset, problems, where), RESETS, base.reset, problems, where
    )
    policy.reset_hour = _take(table, "reset_hour", int, base.reset_hour, problems, where) % 24
    policy.idle_minutes = max(1, _take(table, "idle_minutes", int, base.idle_minutes, problems, where))
    return policy


def gateway_settings_from_dict(
    raw: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> tuple[GatewaySettings, list[str]]:
    """Build settings from the parsed ``[gateway]`` table; problems name the key and the fallback."""
    env = os.environ if env is None else env
    problems: list[str] = []
    s = GatewaySettings()
    s.host = _take(raw, "host", str, s.host, problems, "gateway")
    s.port = _take(raw, "port", int, s.port, problems, "gateway")
    if not 0 <= s.port <= 65535:
        problems.append(f"gateway.port: {s.port} is not a port; using {DEFAULT_PORT}")
        s.port = DEFAULT_PORT
    s.max_concurrent = max(1, _take(raw, "max_concurrent", int, s.max_concurrent, problems, "gateway"))
    s.queue_limit = max(1, _take(raw, "queue_limit", int, s.queue_limit, problems, "gateway"))
    s.turn_timeout_s = max(1.0, _take(raw, "turn_timeout_s", float, s.turn_timeout_s, problems, "gateway"))

    auth_raw = raw.get("auth", {})
    auth = AuthSettings()
    if isinstance(auth_raw, dict):
        auth.token = _take(auth_raw, "token", str, "", problems, "gateway.auth")
        auth.password = _take(auth_raw, "password", str, "", problems, "gateway.auth")
        for key in ("token_role", "password_role"):
            value = _take(auth_raw, key, str, getattr(auth, key), problems, "gateway.auth")
            setattr(auth, key, _choice(value, ROLES, getattr(auth, key), problems, f"gateway.auth.{key}"))
        auth.max_failures = max(
            1, _take(auth_raw, "max_failures", int, auth.max_failures, problems, "gateway.auth")
        )
        auth.failure_window_s = max(
            1.0, _take(auth_raw, "failure_window_s", float, auth.failure_window_s, problems, "gateway.auth")
        )
    auth.token = env.get("MNEMO_GATEWAY_TOKEN") or auth.token
    auth.password = env.get("MNEMO_GATEWAY_PASSWORD") or auth.password
    s.auth = auth

    base = _session_policy(
        raw.get("session", {}) if isinstance(raw.get("session"), dict) else {},
        SessionPolicy(),
        problems,
        "gateway.session",
    )
    agents_raw = raw.get("agents", [])
    agents: list[AgentProfile] = []
    if isinstance(agents_raw, list):
        for i, item in enumerate(agents_raw):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
                problems.append(f"gateway.agents[{i}]: needs an id string; skipped")
                continue
            agents.append(
                AgentProfile(item["id"], _session_policy(item, base, problems, f"gateway.agents[{i}]"))
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
