"""``mnemo security audit``: what weakens this workspace's protections, each finding with its fix."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

EPILOG = """\
exit codes: 0 no finding above info, 4 a warning, 5 a critical finding
            (1: the audit could not run; 2: bad arguments or no workspace)

checks: the gateway's bind, TLS and address allowlist; token, password, token file, audit key and TLS
key strength and file modes; secrets in mnemo.toml; policy rules and allow_binaries that let shells,
interpreters or destructive programs run without asking; the sandbox; secrets in memory files; the
audit log's chain; whether group sessions can reach MEMORY.md; remote chat and embedding providers.
See docs/security.md."""


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("security", help="security checks of a workspace and its settings")
    security_sub = p.add_subparsers(dest="security_command", metavar="SUBCOMMAND", required=True)
    q = security_sub.add_parser(
        "audit",
        help="check the workspace and its settings; exit 4 on warnings, 5 on critical findings",
        description="Check the workspace and its settings; nothing is changed.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(q)
    q.add_argument("--json", action="store_true", help="one JSON object: findings, counts, exitCode")
    q.set_defaults(run=cmd_security_audit)


def cmd_security_audit(args: argparse.Namespace) -> int:
    from mnemo import wire
    from mnemo.cli.common import workspace_services
    from mnemo.security.audit import AuditInputs, security_audit

    services = workspace_services(args)
    try:
        root = services.workspace.root
        report = security_audit(AuditInputs(root, services.settings, services.audit_log))
    finally:
        services.close()
    if args.json:
        print(json.dumps(wire.security_report(report), ensure_ascii=False, indent=2))
        return report.exit_code
    for finding in report.findings:
        where = f" [{finding.where}]" if finding.where else ""
        print(f"{finding.severity.upper():8} {finding.id}{where}\n         {finding.message}")
        print(f"         fix: {finding.fix}")
    counts = report.counts()
    print(
        f"security audit of {root}: {counts['critical']} critical, {counts['warn']} warning(s), "
        f"{counts['info']} info"
    )
    return report.exit_code
