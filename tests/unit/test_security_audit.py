"""``mnemo security audit``: a clean workspace has nothing above info; each bad setting gives its finding."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo import wire
from mnemo.cli.main import main
from mnemo.config import load_settings
from mnemo.policy import sandbox
from mnemo.policy.audit import AuditLog
from mnemo.policy.sandbox import SandboxResult
from mnemo.security.audit import EXIT_CODES, AuditInputs, SecurityReport, security_audit
from mnemo.security.checks import Finding, binary_risk, sandbox_probe

SECRET = "ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cD1fG3hJ5"
STRONG = "a" * 20 + "0123456789abcdef0123"
NOTES = {
    "MEMORY.md": "# Memory\n\n- The project uses PostgreSQL.\n",
    "memory/2026-11-01.md": "# Notes\n\nDeploy on Fridays.\n",
}
Audit = Callable[..., SecurityReport]


@pytest.fixture
def audit(tmp_path: Path) -> Audit:
    """``audit(root, env={...}, probe=...)`` with the audit key and token file kept under tmp_path."""
    (tmp_path / "keys").mkdir(mode=0o700)

    def run(
        root: Path, env: dict[str, str] | None = None, probe: Callable[[Path], str] = lambda r: ""
    ) -> Any:
        settings, _ = load_settings(root)
        log = AuditLog(root / ".mnemo" / "audit.jsonl", key_path=tmp_path / "keys" / "audit.key")
        inputs = AuditInputs(root, settings, log, env or {}, tmp_path / "state" / "gateway-token", probe)
        return security_audit(inputs)

    return run


def ids(report: SecurityReport) -> dict[str, Finding]:
    return {f.id: f for f in report.findings}


def test_clean_workspace_has_no_findings(make_workspace: Any, audit: Audit) -> None:
    report = audit(make_workspace(NOTES))
    assert report.findings == [] and report.exit_code == EXIT_CODES["clean"] == 0
    assert wire.security_report(report)["counts"] == {"critical": 0, "warn": 0, "info": 0}


@pytest.mark.parametrize(
    ("toml", "expected", "severity"),
    [
        ('[gateway]\nhost = "0.0.0.0"\nrequire_tls = false\n', "gateway.plain-public", "critical"),
        ('[gateway]\nhost = "0.0.0.0"\n', "gateway.no-tls", "warn"),
        ('[gateway]\nhost = "10.1.2.3"\n', "gateway.no-allowlist", "warn"),
        ('[gateway]\nhost = "10.1.2.3"\n', "gateway.no-auth", "warn"),
        ('[policy.tools]\nexec = "allow"\n', "policy.exec-allowed", "critical"),
        (
            '[policy]\ndefault = "allow"\n[policy.tools]\nwrite_file = "allow"\n',
            "policy.write_file-allowed",
            "critical",
        ),
        ('[policy]\nallow_binaries = ["python3"]\n', "policy.dangerous-binary", "critical"),
        ('[policy]\nallow_binaries = ["/usr/bin/bash"]\n', "policy.dangerous-binary", "critical"),
        ('[policy]\nallow_binaries = ["rm"]\n', "policy.dangerous-binary", "warn"),
        (
            '[[policy.rules]]\ntool = "exec"\npattern = "*"\ndecision = "allow"\n',
            "policy.allow-everything",
            "critical",
        ),
        (
            '[[policy.rules]]\ntool = "*"\npattern = "git *"\ndecision = "allow"\n',
            "policy.dangerous-rule",
            "warn",
        ),
        (
            '[[policy.rules]]\ntool = "exec"\npattern = "python*"\ndecision = "allow"\n',
            "policy.dangerous-rule",
            "critical",
        ),
        ('[policy]\nnetwork = "yes"\n', "policy.setting", "warn"),
        ("[policy]\nnetwork = true\n", "policy.network", "info"),
        (
            '[[policy.rules]]\ntool = "exec"\npattern = "cat *"\ndecision = "allow"\n',
            "group.memory-readable",
            "critical",
        ),
        ('[gateway.roles.guest]\nallow = ["memory.*"]\n', "group.guest-memory", "critical"),
        ('[agent]\nprovider = "anthropic"\n', "provider.remote", "info"),
        (
            '[embedding]\nprovider = "openai"\nendpoint = "http://10.1.2.3:11434/v1"\n',
            "provider.plain-http",
            "warn",
        ),
    ],
)
def test_each_bad_setting_gives_its_finding(
    make_workspace: Any, audit: Audit, toml: str, expected: str, severity: str
) -> None:
    env = {} if expected == "gateway.no-auth" else {"MNEMO_GATEWAY_TOKEN": STRONG}
    report = audit(make_workspace(NOTES, toml=toml), env=env)
    assert expected in ids(report), [f.id for f in report.findings]
    finding = ids(report)[expected]
    assert finding.severity == severity and finding.fix and finding.message
    assert report.exit_code == {"critical": 5, "warn": 4, "info": 0}[report.worst or "info"]


def test_safe_settings_give_no_findings(make_workspace: Any, audit: Audit, tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_text("-", encoding="utf-8")
    key.chmod(0o600)
    toml = (
        f'[gateway]\nhost = "10.1.2.3"\ntls_cert = "c.pem"\ntls_key = "{key}"\nallow_from = ["10.0.0.0/8"]\n'
        '[policy]\nallow_binaries = ["ls", "git", "rg"]\n'
        '[[policy.rules]]\ntool = "exec"\npattern = "git status*"\ndecision = "allow"\n'
        '[embedding]\nprovider = "openai"\nendpoint = "http://127.0.0.1:11434/v1"\n'
        '[agent]\nprovider = "openai"\nendpoint = "http://localhost:8080/v1"\n'
    )
    report = audit(make_workspace(NOTES, toml=toml), env={"MNEMO_GATEWAY_TOKEN": STRONG})
    assert report.findings == []
    key.chmod(0o644)
    report = audit(make_workspace(NOTES, toml=toml), env={"MNEMO_GATEWAY_TOKEN": STRONG})
    assert [(f.id, f.severity) for f in report.findings] == [("gateway.tls-key-readable", "critical")]


def test_weak_and_misplaced_secrets(make_workspace: Any, audit: Audit, tmp_path: Path) -> None:
    root = make_workspace(NOTES, toml='[gateway.auth]\ntoken = "short-token"\npassword = "hunter2"\n')
    (root / "mnemo.toml").chmod(0o600)
    found = ids(audit(root))
    assert found["secret.weak-token"].where == "gateway.auth.token"
    assert "weak-password" in found["secret.weak-password"].id
    assert (
        found["secret.in-config"].severity == "warn"
        and "gateway.auth.token" in found["secret.in-config"].message
    )
    (root / "mnemo.toml").chmod(0o644)
    found = ids(audit(root))
    assert (
        found["secret.config-readable"].severity == "critical"
        and "chmod 600" in found["secret.config-readable"].fix
    )
    env_only = ids(audit(make_workspace(NOTES), env={"MNEMO_GATEWAY_TOKEN": "tiny"}))
    assert env_only["secret.weak-token"].where == "MNEMO_GATEWAY_TOKEN" and "secret.in-config" not in env_only
    hook = '[gateway.channels.webhook]\nsecret = "abc"\n'
    assert (
        "gateway.channels.webhook.secret"
        in ids(audit(make_workspace(NOTES, toml=hook)))["secret.config-readable"].message
    )


def test_readable_token_file_and_short_audit_key(make_workspace: Any, audit: Audit, tmp_path: Path) -> None:
    token = tmp_path / "state" / "gateway-token"
    token.parent.mkdir()
    token.write_text(STRONG, encoding="utf-8")
    token.chmod(0o644)
    key = tmp_path / "keys" / "audit.key"
    key.write_bytes(b"k" * 16)
    key.chmod(0o600)
    report = audit(make_workspace(NOTES))
    readable = [f for f in report.findings if f.id == "secret.file-readable"]
    assert [f.where for f in readable] == [str(token)] and readable[0].severity == "critical"
    assert ids(report)["secret.weak-key"].where == str(key)
    token.chmod(0o600)
    key.write_bytes(os.urandom(32))
    assert audit(make_workspace(NOTES)).findings == []


def test_secrets_in_memory_files(make_workspace: Any, audit: Audit) -> None:
    root = make_workspace(
        {
            "MEMORY.md": f"# Memory\n\n- token {SECRET}\n",
            "memory/2026-11-02.md": f"# Notes\n\nline\nCI token {SECRET}\n",
            "memory/2026-11-03.md": f"# Notes\n\nexample {SECRET} mnemo: allow-secret\n",
            "sessions/private-editor/2026-10.md": f"# October\n\nuser: token {SECRET}\n",
        }
    )
    findings = [f for f in audit(root).findings if f.id == "memory.secret"]
    assert [(f.where, f.severity) for f in findings] == [
        ("memory/2026-11-02.md#L4", "critical"),  # daily notes reach group sessions' recall
        ("MEMORY.md#L3", "warn"),
        ("sessions/private-editor/2026-10.md#L3", "warn"),  # (a private archive does not)
    ]
    assert "group sessions" not in findings[2].message
    assert all(SECRET not in f.message for f in findings) and "github" in findings[0].message


def test_broken_audit_chain(make_workspace: Any, audit: Audit, tmp_path: Path) -> None:
    root = make_workspace(NOTES)
    log = AuditLog(root / ".mnemo" / "audit.jsonl", key_path=tmp_path / "keys" / "audit.key")
    for i in range(3):
        log.append("decision", {"i": i})
    assert audit(root).findings == []
    log.path.write_bytes(log.path.read_bytes().replace(b'"i":1', b'"i":7'))
    finding = ids(audit(root))["audit.chain-broken"]
    assert finding.severity == "critical" and "edited" in finding.message and "audit restart" in finding.fix


def test_memory_md_link(make_workspace: Any, audit: Audit) -> None:
    root = make_workspace(NOTES)
    os.link(root / "MEMORY.md", root / "memory" / "copy.txt")
    assert ids(audit(root))["group.memory-linked"].severity == "warn"


def test_sandbox_unavailable(make_workspace: Any, audit: Audit, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_workspace(NOTES)
    found = ids(audit(root, probe=lambda r: "bwrap: no permissions"))
    assert "bwrap: no permissions" in found["sandbox.unavailable"].message
    monkeypatch.setenv("PATH", str(root))  # no bwrap to be found: the real probe says so
    sandbox.reset_probe()
    try:
        why = sandbox_probe(root)
    finally:
        sandbox.reset_probe()
    assert "bubblewrap" in why and "not installed" in why


def test_binary_risk_uses_the_policy_tables() -> None:
    assert binary_risk("bash") == ("critical", binary_risk("python3.12")[1])  # type: ignore[index]
    assert binary_risk("/usr/bin/perl")[0] == "critical"  # type: ignore[index]
    assert binary_risk("xargs")[0] == binary_risk("npm")[0] == binary_risk("mv")[0] == "warn"  # type: ignore[index]
    assert binary_risk("ls") is None and binary_risk("rg") is None and binary_risk("git") is None


@pytest.fixture
def fake_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The CLI's own probe, answered as a working bubblewrap would (machines without it exist)."""
    ok = SandboxResult(0, "", "", False, False, False, 0.01)
    monkeypatch.setattr("mnemo.security.checks.run_sandboxed", lambda *a, **k: ok)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("MNEMO_GATEWAY_TOKEN", raising=False)
    monkeypatch.delenv("MNEMO_GATEWAY_PASSWORD", raising=False)


@pytest.mark.usefixtures("fake_sandbox")
def test_cli_exit_codes(make_workspace: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    clean = make_workspace(NOTES)
    assert main(["security", "audit", "-w", str(clean)]) == 0
    assert "0 critical, 0 warning(s), 0 info" in capsys.readouterr().out
    warn = make_workspace(NOTES, toml='[policy]\nallow_binaries = ["rm"]\n')
    assert main(["security", "audit", "-w", str(warn)]) == 4
    assert "WARN     policy.dangerous-binary [policy.allow_binaries]" in capsys.readouterr().out
    critical = make_workspace(NOTES, toml='[policy]\nallow_binaries = ["bash", "rm"]\n')
    assert main(["security", "audit", "-w", str(critical), "--json"]) == 5
    out = json.loads(capsys.readouterr().out)
    assert out["exitCode"] == 5 and out["counts"] == {"critical": 1, "warn": 1, "info": 0}
    assert main(["security", "audit", "-w", str(tmp_path / "nowhere")]) == 2  # no workspace: usage error
