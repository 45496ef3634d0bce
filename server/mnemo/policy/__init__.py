"""The policy core: what the agent may run, in which sandbox, with which approvals, and its audit trail.

* :mod:`mnemo.policy.rules`: allow / confirm / deny per tool and pattern (:func:`check`).
* :mod:`mnemo.policy.shell`: exec command lines split into segments, dangerous constructs refused.
* :mod:`mnemo.policy.destructive`: the built-in deny rules.
* :mod:`mnemo.policy.sandbox`: bubblewrap + rlimits (:func:`run_sandboxed`), never unsandboxed.
* :mod:`mnemo.policy.audit`: the HMAC-chained JSONL audit log.
* :mod:`mnemo.policy.risk`: the per-session prompt-injection risk monitor.
"""

from mnemo.policy.audit import AuditLog, VerifyReport
from mnemo.policy.risk import RiskEvent, RiskMonitor, effective_decision, normalize, scan_text
from mnemo.policy.rules import (
    Decision,
    PolicyConfig,
    Rule,
    Verdict,
    append_allow_rule,
    check,
    check_command,
    load_policy,
    strictest,
)
from mnemo.policy.sandbox import SandboxResult, SandboxUnavailable, run_sandboxed
from mnemo.policy.shell import ParsedCommand, Segment, parse_command

__all__ = [
    "AuditLog",
    "Decision",
    "ParsedCommand",
    "PolicyConfig",
    "RiskEvent",
    "RiskMonitor",
    "Rule",
    "SandboxResult",
    "SandboxUnavailable",
    "Segment",
    "Verdict",
    "VerifyReport",
    "append_allow_rule",
    "check",
    "check_command",
    "effective_decision",
    "load_policy",
    "normalize",
    "parse_command",
    "run_sandboxed",
    "scan_text",
    "strictest",
]
