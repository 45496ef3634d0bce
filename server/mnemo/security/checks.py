"""The checks of ``mnemo security audit`` that reuse the policy, sandbox, secrets and audit modules.

:mod:`mnemo.security.audit` runs them with the gateway and secret-file checks and makes the report.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from mnemo.config import Settings
from mnemo.gateway.settings import MethodRules
from mnemo.policy import binaries, destructive, inline
from mnemo.policy.audit import AuditLog
from mnemo.policy.gate import verify_audit
from mnemo.policy.hosts import is_loopback_host
from mnemo.policy.outbound import redact_outbound
from mnemo.policy.rules import PolicyConfig, check
from mnemo.policy.sandbox import INSTALL_HINT, SandboxUnavailable, run_sandboxed
from mnemo.policy.verdict import Verdict
from mnemo.secrets import scan_text
from mnemo.workspace.layout import Workspace, readable_in

Severity = Literal["critical", "warn", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warn", "info")
MAX_SECRET_FINDINGS = 50
"""Files with secrets reported at most (each finding names its lines)."""
PROBE_SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"  # a GitHub token's shape, not a real one
RULE_PROBES: tuple[tuple[str, str, Severity], ...] = (
    ("bash -c 'id'", "bash", "critical"),
    ("sh ./script.sh", "sh", "critical"),
    ("python3 ./script.py", "python", "critical"),
    ("python ./script.py", "python", "critical"),
    ("perl ./script.pl", "perl", "critical"),
    ("node ./script.js", "node", "critical"),
    ("ruby ./script.rb", "ruby", "critical"),
    ("rm -rf ./notes", "rm", "warn"),
    ("git config core.pager less", "git config", "warn"),
    ("git -c core.pager=less log", "git -c", "warn"),
    ("xargs rm", "xargs", "warn"),
    ("env FOO=1 sh", "env", "warn"),
    ("curl https://example.com", "curl", "warn"),
)
"""Commands an exec allow rule should not match: the rule lets the agent run them without asking."""
RUNS_COMMANDS = binaries.RUNNERS | binaries.ALWAYS_CONFIRM | set(binaries.PACKAGE_READ_ONLY)
RUNS_COMMANDS |= {"env", "xargs", "nohup", "timeout", "nice", "ionice", "exec", "eval", "busybox"}
WRITES = destructive.WRITE_ALL | destructive.WRITE_LAST | destructive.WRITE_AFTER_FIRST
GROUP_READ_PROBE = "cat MEMORY.md"


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    message: str
    fix: str
    where: str = ""
    """A path (``memory/x.md#L3``), a setting (``gateway.host``) or empty."""


# -- policy: rules that let dangerous programs run without asking ----------------------------------
def binary_risk(entry: str) -> tuple[Severity, str] | None:
    """How dangerous allowlisting ``entry`` (a name or a path) is, and why; None when it is not."""
    name = os.path.basename(entry)
    if destructive.INTERPRETERS.match(name) or inline.SHELLS.match(name):
        return "critical", "runs any code it is given (scripts the agent wrote, or -c strings)"
    if name in RUNS_COMMANDS or re.match(r"^pip[0-9.]*$", name):
        return "warn", "runs other programs or project code"
    if name in WRITES:
        return "warn", "deletes or overwrites files"
    if name in destructive.NET_CLIENTS:
        return "warn", "sends data over the network"
    return None


def check_policy(root: Path, policy: PolicyConfig, problems: list[str]) -> list[Finding]:
    findings: list[Finding] = []
    for tool in ("exec", "write_file"):
        if policy.tools.get(tool, policy.default) is Verdict.ALLOW:
            findings.append(
                Finding(
                    f"policy.{tool}-allowed",
                    "critical",
                    f'[policy.tools] {tool} = "allow": every {tool} call without a matching rule runs '
                    "without asking",
                    f'set {tool} = "confirm" and allow the few commands you trust with [[policy.rules]]',
                    f"policy.tools.{tool}",
                )
            )
    for entry in policy.allow_binaries:
        risk = binary_risk(entry)
        if risk:
            findings.append(
                Finding(
                    "policy.dangerous-binary",
                    risk[0],
                    f"allow_binaries lists {entry}, which {risk[1]}",
                    f"remove {entry!r} from policy.allow_binaries (approve its calls one by one)",
                    "policy.allow_binaries",
                )
            )
    for rule in policy.rules:
        if rule.decision is not Verdict.ALLOW or rule.tool not in ("exec", "*"):
            continue
        hits = [(what, sev) for probe, what, sev in RULE_PROBES if rule.matches("exec", [probe])]
        if not hits:
            continue
        everything = rule.pattern in ("", "*")
        where = rule.name.removeprefix("config:").replace("rules", "policy.rules")
        findings.append(
            Finding(
                "policy.allow-everything" if everything else "policy.dangerous-rule",
                "critical" if everything or any(s == "critical" for _, s in hits) else "warn",
                f"{where} (pattern {rule.pattern!r}) allows "
                + ("every command" if everything else ", ".join(dict.fromkeys(w for w, _ in hits)))
                + " without asking",
                "narrow the pattern to the exact read-only commands you need, or make it confirm",
                where,
            )
        )
    findings += [
        Finding("policy.setting", "warn", f"mnemo.toml: {p} (the default is used)", "fix the entry", "policy")
        for p in problems
    ]
    if policy.network and not policy.network_domains:
        findings.append(
            Finding(
                "policy.network",
                "info",
                "sandboxed commands may use the network (policy.network = true)",
                "list the domains they need in policy.network_domains instead (the rest is refused)",
                "policy.network",
            )
        )
    return findings + check_network_hosts(policy)


def check_network_hosts(policy: PolicyConfig) -> list[Finding]:
    """A name pinned to a non-public address lets sandboxed commands reach this machine or its network."""
    allowlist = policy.network_allowlist()
    findings: list[Finding] = []
    for name, address in policy.network_hosts.items():
        ip = ipaddress.ip_address(address)
        if allowlist is None or ip.is_global or not allowlist.allows(name):
            continue
        findings.append(
            Finding(
                "policy.network-host-private",
                "warn",
                f"policy.network_hosts pins {name} to {address}: sandboxed commands can reach "
                + ("this machine's own services" if ip.is_loopback else "that host on a private network"),
                "remove the pin unless the agent's commands must reach that service",
                f"policy.network_hosts.{name}",
            )
        )
    return findings


# -- the sandbox ------------------------------------------------------------------------------------
def sandbox_probe(root: Path) -> str:
    """'' when bubblewrap confines a command here (run in a temporary folder), else why not."""
    with tempfile.TemporaryDirectory(prefix="mnemo-audit-") as tmp:
        try:
            result = run_sandboxed("true", Path(tmp), timeout_s=15)
        except SandboxUnavailable as exc:
            return str(exc)
    return "" if result.exit_code == 0 else f"`true` exited {result.exit_code} in the sandbox"


def check_sandbox(root: Path, probe: Callable[[Path], str]) -> list[Finding]:
    why = probe(root)
    if not why:
        return []
    return [
        Finding(
            "sandbox.unavailable",
            "warn",
            f"the sandbox cannot run commands here, so the agent's exec tool refuses every command: {why}",
            INSTALL_HINT,
        )
    ]


# -- secrets in memory files ------------------------------------------------------------------------
def check_memory_secrets(root: Path, settings: Settings) -> list[Finding]:
    workspace = Workspace(
        root,
        ignore=[*settings.index.ignore, settings.index.dir],
        extra_paths=settings.index.extra_paths,
        include_sessions=False,
    )
    findings: list[Finding] = []
    for memory_file, st in workspace.scan():
        if st.st_size > settings.index.max_file_bytes:
            continue
        try:
            text = (root / memory_file.path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        hits = scan_text(text)
        if not hits:
            continue
        private = not readable_in(memory_file.path, private=False)  # MEMORY.md, a private-* archive
        lines = sorted({h.line + 1 for h in hits})
        rules = ", ".join(sorted({h.rule_id for h in hits}))
        findings.append(
            Finding(
                "memory.secret",
                "warn" if private else "critical",
                f"{memory_file.path}: {len(hits)} secret(s) ({rules}) on line(s) "
                f"{', '.join(map(str, lines[:10]))}"
                + ("" if private else "; this file reaches group sessions' recall"),
                "move the secret to a password manager or an environment variable and delete it from the "
                "note (and from Git history); a false positive: add `mnemo: allow-secret` to the line",
                f"{memory_file.path}#L{lines[0]}",
            )
        )
        if len(findings) >= MAX_SECRET_FINDINGS:
            break
    return findings


# -- the audit log ------------------------------------------------------------------------------------
def check_audit_log(audit: AuditLog) -> list[Finding]:
    if not audit.path.exists() and not audit.head_path.exists():
        return []  # nothing written yet (verifying would create a key)
    try:
        report = verify_audit(audit)
    except (OSError, ValueError) as exc:
        return [
            Finding(
                "audit.unreadable",
                "critical",
                f"the audit log cannot be checked: {exc}",
                "see `mnemo audit verify`",
                str(audit.path),
            )
        ]
    if report.ok:
        return []
    return [
        Finding(
            "audit.chain-broken",
            "critical",
            f"the audit log {audit.path} does not verify: " + "; ".join(report.problems[:3]),
            "find out what changed it (`mnemo audit verify`), then start a new chain with "
            "`mnemo audit restart --reason ...` (the old log is kept aside)",
            str(audit.path),
        )
    ]


# -- group sessions and MEMORY.md -----------------------------------------------------------------------
def check_group_privacy(root: Path, policy: PolicyConfig, roles: dict[str, MethodRules]) -> list[Finding]:
    findings: list[Finding] = []
    decision = check("exec", {"command": GROUP_READ_PROBE}, root, policy)
    if decision.verdict is Verdict.ALLOW:
        findings.append(
            Finding(
                "group.memory-readable",
                "critical",
                f"`{GROUP_READ_PROBE}` runs without asking ({decision.rule}): a group session's agent can "
                "read MEMORY.md through exec",
                'remove the allow rule or binary that lets it run (mnemo policy check "cat MEMORY.md")',
                decision.rule,
            )
        )
    memory = root / "MEMORY.md"
    if memory.is_symlink() or (memory.is_file() and memory.stat().st_nlink > 1):
        findings.append(
            Finding(
                "group.memory-linked",
                "warn",
                "MEMORY.md is a link (symbolic or hard): its text may be reachable under another name",
                "make MEMORY.md a plain file of its own",
                "MEMORY.md",
            )
        )
    guest = roles.get("guest")
    granted = [p for p in (guest.allow if guest else []) if p.startswith("memory") or p == "*"]
    if granted:
        findings.append(
            Finding(
                "group.guest-memory",
                "critical",
                f"[gateway.roles.guest] allows {', '.join(granted)}: guests (always group sessions) can read "
                "MEMORY.md over the gateway",
                "remove memory.* from gateway.roles.guest.allow",
                "gateway.roles.guest",
            )
        )
    return findings


# -- remote providers ---------------------------------------------------------------------------------
def check_providers(settings: Settings) -> list[Finding]:
    remote: list[tuple[str, str]] = []
    agent = settings.agent
    if agent.provider == "anthropic":
        remote.append(("agent", agent.endpoint or "https://api.anthropic.com"))
    elif agent.provider == "openai":
        remote.append(("agent", agent.endpoint or "http://127.0.0.1:8080/v1"))
    if settings.embedding.provider == "openai":
        remote.append(("embedding", settings.embedding.endpoint))
    findings: list[Finding] = []
    filter_works = redact_outbound(f"token {PROBE_SECRET}")[1] > 0
    for section, url in remote:
        parts = urlsplit(url)
        if is_loopback_host(parts.hostname or ""):
            continue
        if not filter_works:
            findings.append(
                Finding(
                    "provider.no-outbound-filter",
                    "critical",
                    f"[{section}] sends memory to {url}, and the outbound secret filter did not redact a "
                    "test secret",
                    "reinstall mnemo (its secret rules are missing) or use a local provider",
                    f"{section}.endpoint",
                )
            )
        if parts.scheme != "https":
            findings.append(
                Finding(
                    "provider.plain-http",
                    "warn",
                    f"[{section}] endpoint {url} is remote and not https: memory and the API key cross the "
                    "network in clear text",
                    "use an https:// endpoint (or a provider on 127.0.0.1)",
                    f"{section}.endpoint",
                )
            )
        findings.append(
            Finding(
                "provider.remote",
                "info",
                f"[{section}] sends memory text to {parts.hostname}; secrets are redacted first by the "
                "outbound filter",
                "use a local provider to keep memory on this machine",
                f"{section}.endpoint",
            )
        )
    return findings
