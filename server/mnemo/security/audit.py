"""``mnemo security audit``: check a workspace and its settings for what weakens mnemo's protections.

Each check returns :class:`Finding` objects (an id, a severity, what is wrong, and the fix). The checks
only read: settings (``mnemo.toml``), file modes, the memory files, the audit log; the sandbox probe runs
``true`` in bubblewrap. Nothing is changed and nothing leaves the machine. Fronts: the CLI
(``mnemo security audit``, :mod:`mnemo.cli.security`) and the LSP request ``mnemo/securityAudit``.

Exit codes (:data:`EXIT_CODES`): 0 nothing above info, 4 a warning, 5 a critical finding; 1 stays "mnemo
could not run it" and 2 "bad arguments or no workspace", as for every mnemo command.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mnemo.config import CONFIG_FILE, Settings
from mnemo.gateway.auth import default_token_file
from mnemo.gateway.settings import GatewaySettings, load_gateway_settings
from mnemo.policy.audit import AuditLog
from mnemo.policy.hosts import is_loopback_host
from mnemo.policy.rules import PolicyConfig, load_policy
from mnemo.security.checks import (
    SEVERITIES,
    Finding,
    Severity,
    check_audit_log,
    check_group_privacy,
    check_memory_secrets,
    check_policy,
    check_providers,
    check_sandbox,
    sandbox_probe,
)

EXIT_CODES = {"clean": 0, "warn": 4, "critical": 5}
MIN_TOKEN_CHARS = 32
MIN_PASSWORD_CHARS = 12
CHANNEL_SECRET_KEYS = frozenset(
    {"secret", "token", "bot_token", "app_token", "signing_secret", "webhook_secret", "password"}
)


@dataclass
class SecurityReport:
    workspace: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def worst(self) -> Severity | None:
        present = {f.severity for f in self.findings}
        return next((s for s in SEVERITIES if s in present), None)

    @property
    def exit_code(self) -> int:
        worst = self.worst
        return EXIT_CODES[worst] if worst in ("critical", "warn") else EXIT_CODES["clean"]

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}


@dataclass
class AuditInputs:
    """What the checks look at; :func:`security_audit` reads the rest from ``root``."""

    root: Path
    settings: Settings
    audit: AuditLog
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    token_file: Path | None = None
    """The gateway's generated token file (default: $XDG_STATE_HOME/mnemo/gateway-token)."""
    probe_sandbox: Callable[[Path], str] = sandbox_probe
    """'' when the sandbox runs a command here, else why not."""


def security_audit(inputs: AuditInputs) -> SecurityReport:
    """Run every check; findings sorted critical first."""
    root = inputs.root
    gateway, _ = load_gateway_settings(root, inputs.env)
    policy_problems: list[str] = []
    policy: PolicyConfig = load_policy(root, policy_problems)
    raw = _raw_config(root)
    findings: list[Finding] = []
    findings += check_gateway(root, gateway)
    findings += check_secret_files(root, gateway, raw, inputs)
    findings += check_policy(root, policy, policy_problems)
    findings += check_sandbox(root, inputs.probe_sandbox)
    findings += check_memory_secrets(root, inputs.settings)
    findings += check_audit_log(inputs.audit)
    findings += check_group_privacy(root, policy, gateway.roles)
    findings += check_providers(inputs.settings)
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    return SecurityReport(str(root), findings)


def _raw_config(root: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((root / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


# -- the gateway --------------------------------------------------------------------------------------
def check_gateway(root: Path, s: GatewaySettings) -> list[Finding]:
    findings: list[Finding] = []
    tls = bool(s.tls_cert and s.tls_key)
    if not is_loopback_host(s.host):
        if not tls and not s.require_tls:
            findings.append(
                Finding(
                    "gateway.plain-public",
                    "critical",
                    f"the gateway listens on {s.host} without TLS (require_tls = false): chats, memory "
                    "and logins cross the network in clear text",
                    "set gateway.tls_cert and gateway.tls_key, or keep require_tls = false only behind a "
                    "TLS proxy on the same machine and bind host = 127.0.0.1",
                    "gateway.host",
                )
            )
        elif not tls:
            findings.append(
                Finding(
                    "gateway.no-tls",
                    "warn",
                    f"gateway.host = {s.host} is reachable from other machines but no certificate is "
                    "set: the gateway refuses to start",
                    "set gateway.tls_cert and gateway.tls_key (or host = 127.0.0.1)",
                    "gateway.host",
                )
            )
        if not s.allow_from:
            findings.append(
                Finding(
                    "gateway.no-allowlist",
                    "warn",
                    f"the gateway on {s.host} accepts connections from any address",
                    'list the client networks: gateway.allow_from = ["10.0.0.0/8"]',
                    "gateway.allow_from",
                )
            )
        if not s.auth.configured:
            findings.append(
                Finding(
                    "gateway.no-auth",
                    "warn",
                    f"gateway.host = {s.host} without a configured token or password: the gateway "
                    "refuses to start",
                    "set MNEMO_GATEWAY_TOKEN (32+ random characters) in the gateway's environment",
                    "gateway.auth",
                )
            )
    if tls:
        key = Path(s.tls_key).expanduser()
        key = key if key.is_absolute() else root / key
        mode = _mode(key)
        if mode is not None and mode & 0o077:
            findings.append(
                Finding(
                    "gateway.tls-key-readable",
                    "critical" if mode & 0o004 else "warn",
                    f"the TLS private key {key} is readable by other users (mode {mode:o})",
                    f"chmod 600 {key}",
                    "gateway.tls_key",
                )
            )
    return findings


# -- secrets: strength, where they are kept, who can read them ----------------------------------------
def check_secret_files(
    root: Path, s: GatewaySettings, raw: Mapping[str, Any], inputs: AuditInputs
) -> list[Finding]:
    findings: list[Finding] = []
    env_token = inputs.env.get("MNEMO_GATEWAY_TOKEN", "")
    if s.auth.token and len(s.auth.token) < MIN_TOKEN_CHARS:
        where = "MNEMO_GATEWAY_TOKEN" if env_token else "gateway.auth.token"
        findings.append(
            Finding(
                "secret.weak-token",
                "warn",
                f"the gateway token ({where}) is {len(s.auth.token)} characters; it can be guessed offline",
                f"use {MIN_TOKEN_CHARS}+ random characters: openssl rand -hex 32",
                where,
            )
        )
    if s.auth.password and len(s.auth.password) < MIN_PASSWORD_CHARS:
        findings.append(
            Finding(
                "secret.weak-password",
                "warn",
                f"the gateway password is {len(s.auth.password)} characters",
                f"use a passphrase of {MIN_PASSWORD_CHARS}+ characters (or a token instead)",
                "gateway.auth.password",
            )
        )
    in_config = _secrets_in_config(raw)
    if in_config:
        config = root / CONFIG_FILE
        mode = _mode(config) or 0
        readable = bool(mode & 0o044)
        findings.append(
            Finding(
                "secret.config-readable" if readable else "secret.in-config",
                "critical" if readable else "warn",
                f"{CONFIG_FILE} holds secrets ({', '.join(in_config)})"
                + (f" and other users can read it (mode {mode:o})" if readable else "")
                + "; it is also easy to commit",
                "move them to the environment (MNEMO_GATEWAY_TOKEN, MNEMO_GATEWAY_PASSWORD, each channel's "
                f"*_env variable){'; meanwhile chmod 600 ' + CONFIG_FILE if readable else ''}",
                CONFIG_FILE,
            )
        )
    for name, path, minimum in (
        ("gateway token file", inputs.token_file or default_token_file(), 0),
        ("audit key", inputs.audit.key_path, 32),
    ):
        findings += _private_file(name, path, minimum)
    return findings


def _secrets_in_config(raw: Mapping[str, Any]) -> list[str]:
    gateway = raw.get("gateway", {})
    if not isinstance(gateway, dict):
        return []
    found: list[str] = []
    auth = gateway.get("auth", {})
    if isinstance(auth, dict):
        found += [f"gateway.auth.{k}" for k in ("token", "password") if auth.get(k)]
    channels = gateway.get("channels", {})
    for name, table in channels.items() if isinstance(channels, dict) else []:
        if isinstance(table, dict):
            found += [f"gateway.channels.{name}.{k}" for k in sorted(CHANNEL_SECRET_KEYS) if table.get(k)]
    return found


def _private_file(name: str, path: Path, min_bytes: int) -> list[Finding]:
    mode = _mode(path)
    if mode is None:
        return []
    findings: list[Finding] = []
    if mode & 0o077:
        findings.append(
            Finding(
                "secret.file-readable",
                "critical",
                f"the {name} {path} is readable or writable by other users (mode {mode:o})",
                f"chmod 600 {path}",
                str(path),
            )
        )
    try:
        size = path.stat().st_size
    except OSError:
        size = min_bytes
    if size < min_bytes:
        findings.append(
            Finding(
                "secret.weak-key",
                "warn",
                f"the {name} {path} is {size} bytes (at least {min_bytes} expected)",
                "replace it with 32 random bytes (head -c 32 /dev/urandom > KEY; chmod 600 KEY), then "
                "run `mnemo audit restart`",
                str(path),
            )
        )
    return findings
