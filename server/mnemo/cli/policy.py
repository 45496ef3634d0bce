"""``mnemo policy check``, ``mnemo exec``, ``mnemo audit verify|show``: the policy core from a terminal."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemo.policy.audit import AuditLog
    from mnemo.services import Services

CLI_SESSION = "cli"
CHECK_EXIT_CODES = {"allow": 0, "deny": 1, "confirm": 3}
"""``mnemo policy check`` exit status per verdict (2 stays argparse's "bad arguments")."""


def add_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("policy", help="tool policy: what may run (see docs/security.md)")
    policy_sub = p.add_subparsers(dest="policy_command", metavar="SUBCOMMAND", required=True)
    q = policy_sub.add_parser(
        "check",
        help="print the decision and the rule for a command (nothing runs)",
        description="Print the decision and the rule for a command or path; nothing runs.",
        epilog="exit codes: 0 allow, 1 deny, 3 confirm (2: bad arguments)",
    )
    add_common(q)
    q.add_argument("subject", help='a command line, e.g. "git status", or a path with --tool')
    q.add_argument("--tool", default="exec", choices=["exec", "write_file", "read_file"])
    q.add_argument("--json", action="store_true")
    q.set_defaults(run=cmd_policy_check)

    p = sub.add_parser("exec", help="run a command under the policy: approval, sandbox, audit")
    add_common(p)
    p.add_argument("shell_command", metavar="COMMAND", help="the command line, quoted")
    p.add_argument(
        "--yes", "-y", action="store_true", help="approve confirm-level commands (never deny-level)"
    )
    p.add_argument("--approval-timeout", type=float, default=120.0, help="seconds to answer (default 120)")
    p.set_defaults(run=cmd_exec)

    p = sub.add_parser("audit", help="the tamper-evident audit log")
    audit_sub = p.add_subparsers(dest="audit_command", metavar="SUBCOMMAND", required=True)
    q = audit_sub.add_parser("verify", help="check every entry's hash, HMAC and chain (exit 1 when tampered)")
    add_common(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(run=cmd_audit_verify)
    q = audit_sub.add_parser(
        "restart",
        help="start a new log after a deleted, replaced or unverifiable one (the old log and its "
        "recorded tail are kept aside, and the new log's first entry says so)",
    )
    add_common(q)
    q.add_argument("--reason", default="restarted by the user", help="recorded in the new log's first entry")
    q.set_defaults(run=cmd_audit_restart)
    q = audit_sub.add_parser("show", help="print the last entries")
    add_common(q)
    q.add_argument("-n", type=int, default=20, help="number of entries (default 20)")
    q.add_argument("--json", action="store_true", help="one JSON entry a line")
    q.set_defaults(run=cmd_audit_show)


@contextmanager
def _services(args: argparse.Namespace) -> Iterator[Services]:
    """The composition root's services: the policy, the audit log, the tool gate (no index, no model)."""
    from mnemo.cli.common import workspace_services

    services = workspace_services(args)
    try:
        yield services
    finally:
        services.close()


def cmd_policy_check(args: argparse.Namespace) -> int:
    from mnemo.policy import check

    with _services(args) as services:
        config, problems = services.policy()
        root = services.workspace.root
    for problem in problems:
        print(f"warning: mnemo.toml: {problem}", file=sys.stderr)
    key = "command" if args.tool == "exec" else "path"
    decision = check(args.tool, {key: args.subject}, root, config)
    if args.json:
        print(
            json.dumps({"decision": str(decision.verdict), "rule": decision.rule, "reason": decision.reason})
        )
    else:
        print(f"{decision.verdict}\t{decision.rule}\t{decision.reason}")
    return CHECK_EXIT_CODES[str(decision.verdict)]


def cmd_exec(args: argparse.Namespace) -> int:
    from mnemo.policy.approvals import TerminalApprover

    with _services(args) as services:
        approver = TerminalApprover(assume_yes=args.yes)
        gate = services.tool_gate(approver, approval_timeout_s=args.approval_timeout)
        outcome = gate.call(CLI_SESSION, "exec", {"command": args.shell_command})
    if outcome.exit_code is None:  # refused, denied, or the sandbox could not start
        print(f"mnemo: {outcome.output}", file=sys.stderr)
        return 1
    if outcome.output:
        print(outcome.output)
    return outcome.exit_code


def _audit(args: argparse.Namespace) -> AuditLog:
    with _services(args) as services:
        return services.audit_log


def cmd_audit_verify(args: argparse.Namespace) -> int:
    from mnemo.policy.gate import verify_audit

    audit = _audit(args)
    report = verify_audit(audit)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "entries": report.entries,
                    "problems": report.problems,
                    "notes": report.notes,
                }
            )
        )
    elif report.ok:
        print(f"audit log OK: {report.entries} entries, chain and signatures intact ({audit.path})")
        for note in report.notes:
            print(f"  note: {note}")
    else:
        print(f"audit log TAMPERED ({audit.path}):")
        for problem in report.problems:
            print(f"  {problem}")
    return 0 if report.ok else 1


def cmd_audit_restart(args: argparse.Namespace) -> int:
    audit = _audit(args)
    entry = audit.restart(args.reason)
    kept = entry["data"]["kept"]
    for what, where in kept.items():
        print(f"kept the old {what} as {where}")
    print(f"new audit log started: {audit.path} (seq {entry['seq']}, records the previous tail)")
    return 0


def cmd_audit_show(args: argparse.Namespace) -> int:
    entries = _audit(args).entries()[-max(args.n, 0) :] if args.n else []
    for entry in entries:
        if args.json:
            print(json.dumps(entry, ensure_ascii=False))
            continue
        when = datetime.datetime.fromtimestamp(entry.get("ts", 0)).isoformat(timespec="seconds")
        data = entry.get("data", {})
        detail = " ".join(f"{k}={_short(v)}" for k, v in data.items() if k != "session")
        print(
            f"{entry.get('seq'):>5} {when} {entry.get('kind', '?'):<13} [{data.get('session', '-')}] {detail}"
        )
    return 0


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
