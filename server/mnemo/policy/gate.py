"""ToolGate: the one door through which the agent (and ``mnemo exec``, and ``mnemo/exec``) runs tools.

For each call: the policy decides (:func:`mnemo.policy.rules.check`), the session's risk level can only
tighten that (:func:`mnemo.policy.risk.effective_decision`); ``deny`` returns a refusal the agent reads,
``confirm`` asks the :class:`~mnemo.policy.approvals.Approver` (no answer in time means deny), ``allow``
runs the tool: ``exec`` in the bubblewrap sandbox (never unsandboxed: when the sandbox cannot start the
call fails closed), ``write_file`` inside the workspace only, ``read_file``. The request, the decision,
the approval, any policy change, risk-level changes and the result are written to the audit log; if the
log cannot be written, nothing runs.
"""

from __future__ import annotations

import copy
import glob
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo.atomic_file import replace_text
from mnemo.policy.approvals import ApprovalRequest, Approver, Choice
from mnemo.policy.audit import AuditLog, VerifyReport
from mnemo.policy.file_tools import ToolError, read_file, write_file
from mnemo.policy.netproxy import NetworkEvent
from mnemo.policy.outbound import redact_outbound
from mnemo.policy.risk import RiskEvent, RiskMonitor, effective_decision
from mnemo.policy.rules import Decision, PolicyConfig, Verdict, append_allow_rule, check, load_policy
from mnemo.policy.sandbox import SandboxUnavailable, run_sandboxed
from mnemo.policy.shell import is_inside, parse_command, resolve_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    output: str
    """What the agent sees: the tool's output, or why it did not run."""
    decision: str
    """The effective verdict: ``allow``, ``confirm`` (then approved) or ``deny``."""
    rule: str
    exit_code: int | None = None
    approval: str = ""
    """``allow_once`` / ``always`` / ``deny`` when someone was asked, else empty."""


class ToolGate:
    def __init__(
        self,
        workspace: Path,
        config: PolicyConfig,
        audit: AuditLog,
        approver: Approver,
        risk: RiskMonitor | None = None,
        approval_timeout_s: float = 120,
        *,
        exec_timeout_s: float = 60,
        max_read_bytes: int = 256_000,
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.config = config
        self.audit = audit
        self.approver = approver
        self.approval_timeout_s = approval_timeout_s
        self.exec_timeout_s = exec_timeout_s
        self.max_read_bytes = max_read_bytes
        self._template = risk or RiskMonitor()
        self._monitors: dict[str, RiskMonitor] = {self._template.session: self._template} if risk else {}
        self._lock = threading.Lock()

    def with_approver(self, approver: Approver) -> ToolGate:
        """The same gate (policy, audit, risk monitors shared) asking another approver."""
        other = copy.copy(self)
        other.approver = approver
        return other

    # -- risk ---------------------------------------------------------------------------------
    def monitor(self, session: str) -> RiskMonitor:
        with self._lock:
            found = self._monitors.get(session)
            if found is None:
                t = self._template
                found = RiskMonitor(session, t.half_life_s, t.thresholds, t.clock)
                self._monitors[session] = found
            return found

    def _audit_risk(self, event: RiskEvent | None) -> None:
        if event is not None:
            self.audit.append("risk", event.to_audit())

    def observe_message(self, session: str, text: str) -> int:
        """Feed a user message to the session's risk monitor; returns the level (changes are audited)."""
        monitor = self.monitor(session)
        _, event = monitor.observe_message(text)
        self._audit_risk(event)
        return monitor.level()

    def risk_status(self) -> dict[str, Any]:
        """``{"level": max over sessions, "sessions": {name: {"level", "score", "notice"}}}``."""
        with self._lock:
            monitors = dict(self._monitors)
        sessions: dict[str, Any] = {}
        for name, monitor in monitors.items():
            self._audit_risk(monitor.poll())
            sessions[name] = {
                "level": monitor.level(),
                "score": round(monitor.score, 2),
                "notice": monitor.notice,
            }
        return {"level": max((s["level"] for s in sessions.values()), default=0), "sessions": sessions}

    # -- the call -----------------------------------------------------------------------------
    def call(
        self,
        session: str,
        tool: str,
        args: dict[str, Any],
        *,
        approval_timeout_s: float | None = None,
        run: Callable[[], tuple[str, bool]] | None = None,
    ) -> ToolOutcome:
        """Decide, ask when needed, run, audit. Never raises for a tool problem: the outcome says it.

        ``run``: a plugin tool (:mod:`mnemo.agent.tool_plugins`), run in place of a built-in one."""
        args = dict(args or {})
        try:
            self.audit.append("tool_call", {"session": session, "tool": tool, "args": _redacted(args)})
        except (OSError, ValueError) as exc:
            log.error("audit log unavailable (%s): refusing %s", exc, tool)
            return ToolOutcome(False, f"refused: the audit log cannot be written ({exc})", "deny", "audit")
        monitor = self.monitor(session)
        self._audit_risk(monitor.poll())
        try:
            base = check(tool, args, self.workspace, self.config)
        except Exception as exc:  # a policy bug must not let the call through
            log.exception("policy check failed for %s", tool)
            base = Decision(Verdict.DENY, "policy:error", f"the policy check failed: {exc}")
        level = monitor.level()
        decision = effective_decision(level, tool, base)
        self.audit.append(
            "decision",
            {
                "session": session,
                "tool": tool,
                "decision": str(decision.verdict),
                "rule": decision.rule,
                "reason": decision.reason,
                "risk_level": level,
                **({"base_rule": base.rule} if base is not decision else {}),
            },
        )
        approval = ""
        if decision.verdict == Verdict.DENY:
            return self._finish(
                session, tool, decision, f"refused by policy ({decision.rule}): {decision.reason}"
            )
        if decision.verdict == Verdict.CONFIRM:
            timeout = self.approval_timeout_s if approval_timeout_s is None else approval_timeout_s
            request = ApprovalRequest(
                session=session,
                tool=tool,
                args=args,
                summary=_summary(tool, args),
                decision="confirm",
                rule=decision.rule,
                reason=decision.reason,
                timeout_s=timeout,
                always_patterns=self._always_patterns(tool, args) if _relaxable(base) else [],
            )
            choice = self._ask(request)
            approval = choice
            if choice == "deny":
                why = (
                    f"no answer within {timeout:g}s"
                    if request.resolution == "timeout"
                    else "the user denied it"
                )
                return self._finish(session, tool, decision, f"refused: {why} ({request.summary})", approval)
            if choice == "always":
                self._always_allow(request)
        return self._run(session, tool, args, decision, approval, run)

    def _ask(self, request: ApprovalRequest) -> Choice:
        started = time.monotonic()
        try:
            choice = self.approver.ask(request)
        except Exception as exc:  # an approver that fails means no approval
            log.warning("approver failed (%s): denying %s", exc, request.summary)
            choice, request.resolution = "deny", "error"
        if choice not in ("allow_once", "always", "deny"):
            choice, request.resolution = "deny", request.resolution or "invalid answer"
        self.audit.append(
            "approval",
            {
                "id": request.id,
                "session": request.session,
                "tool": request.tool,
                "summary": redact_outbound(request.summary)[0],
                "rule": request.rule,
                "choice": choice,
                "by": request.resolution or "approver",
                "waited_s": round(time.monotonic() - started, 3),
            },
        )
        return choice

    def _always_allow(self, request: ApprovalRequest) -> None:
        if not request.always_patterns:
            return
        path = self.workspace / "mnemo.toml"
        added: list[str] = []
        with self._lock:
            try:
                text = path.read_text(encoding="utf-8") if path.exists() else ""
                for pattern in request.always_patterns:
                    text = append_allow_rule(
                        text, request.tool, pattern, f"always allowed (approval {request.id})"
                    )
                    added.append(pattern)
                replace_text(path, text)
            except (OSError, ValueError) as exc:
                log.warning("could not add an allow rule to %s: %s (allowed once)", path, exc)
                self.audit.append(
                    "policy_change",
                    {"file": str(path), "tool": request.tool, "patterns": added, "error": str(exc)},
                )
                return
            fresh = load_policy(self.workspace)
            self.config.rules.extend(fresh.rules[-len(added) :])
        self.audit.append(
            "policy_change",
            {
                "file": str(path),
                "tool": request.tool,
                "patterns": added,
                "decision": "allow",
                "approval": request.id,
            },
        )

    def _always_patterns(self, tool: str, args: dict[str, Any]) -> list[str]:
        if tool == "exec":
            parsed = parse_command(str(args.get("command", "")), self.workspace)
            return list(dict.fromkeys(glob.escape(seg.text) for seg in parsed.segments if seg.argv))
        if tool in ("write_file", "read_file") and isinstance(args.get("path"), str):
            target = resolve_path(args["path"], self.workspace)
            inside = is_inside(target, self.workspace)
            return [glob.escape(os.path.relpath(target, self.workspace) if inside else str(target))]
        return []

    # -- running ------------------------------------------------------------------------------
    def _run(
        self,
        session: str,
        tool: str,
        args: dict[str, Any],
        decision: Decision,
        approval: str,
        plugin: Callable[[], tuple[str, bool]] | None = None,
    ) -> ToolOutcome:
        exit_code: int | None = None
        try:
            if tool == "exec":
                output, exit_code = self._exec(str(args.get("command", "")), session)
                ok = exit_code == 0
            elif tool == "write_file":
                output, ok = write_file(self.workspace, args), True
            elif tool == "read_file":
                output, ok = read_file(self.workspace, args, self.max_read_bytes), True
            elif plugin is not None:
                output, ok = plugin()
            else:
                output, ok = f"unknown tool {tool!r}", False
        except SandboxUnavailable as exc:
            output, ok = (
                f"not run: the sandbox is unavailable, and commands never run unsandboxed. {exc}",
                False,
            )
        except (ToolError, OSError, ValueError) as exc:
            output, ok = f"{tool} failed: {exc}", False
        if ok and (tool in ("exec", "read_file") or plugin is not None):  # what came in from outside
            self._audit_risk(self.monitor(session).observe_tool_result(tool, output)[1])
        return self._finish(session, tool, decision, output, approval, ok=ok, exit_code=exit_code, ran=True)

    def _finish(
        self,
        session: str,
        tool: str,
        decision: Decision,
        output: str,
        approval: str = "",
        *,
        ok: bool = False,
        exit_code: int | None = None,
        ran: bool = False,
    ) -> ToolOutcome:
        result = "ok" if ok else "failed" if ran else "refused"
        self.audit.append(
            "tool_call",
            {
                "session": session,
                "tool": tool,
                "result": result,
                "exit_code": exit_code,
                "output_sha256": hashlib.sha256(output.encode("utf-8", "replace")).hexdigest(),
                "output_bytes": len(output.encode("utf-8", "replace")),
            },
        )
        return ToolOutcome(ok, output, str(decision.verdict), decision.rule, exit_code, approval)

    def _exec(self, command: str, session: str) -> tuple[str, int]:
        def audit_network(event: NetworkEvent) -> None:  # raising refuses the connection
            self.audit.append("decision", event.to_audit(session))

        result = run_sandboxed(
            command,
            self.workspace,
            network=self.config.network,
            timeout_s=self.exec_timeout_s,
            network_domains=self.config.network_allowlist(),
            on_network=audit_network,
        )
        parts = [result.stdout.rstrip("\n")] if result.stdout else []
        if result.stderr:
            parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
        if result.timed_out:
            parts.append(f"[timed out after {self.exec_timeout_s:g}s: killed]")
        if result.truncated:
            parts.append("[output truncated]")
        if result.exit_code != 0:
            parts.append(f"[exit code {result.exit_code}]")
        code = result.exit_code if not result.timed_out else (result.exit_code or 124)
        return "\n".join(parts), code


def _relaxable(base: Decision) -> bool:
    """Whether an allow rule in mnemo.toml could turn this confirmation into an allow. Built-in and
    shell confirmations (inline interpreter code, editors, package scripts, risk escalations) always ask
    again, so "always" is not offered for them: it would add a rule that changes nothing."""
    return base.verdict == Verdict.CONFIRM and not base.rule.startswith(("builtin:", "shell:", "risk:"))


def _summary(tool: str, args: dict[str, Any]) -> str:
    if tool == "exec":
        return str(args.get("command", ""))
    if tool == "write_file":
        content = args.get("content")
        size = len(content.encode("utf-8")) if isinstance(content, str) else 0
        return f"write_file {args.get('path', '')} ({size} bytes)"
    if tool == "read_file":
        return f"read_file {args.get('path', '')}"
    return f"{tool} {args}"


def _redacted(args: dict[str, Any]) -> dict[str, Any]:
    """Args as audited: secrets redacted, long file contents replaced by their size and hash."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if key == "content" and isinstance(value, str) and len(value) > 200:
            raw = value.encode("utf-8")
            out[key] = {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
        elif isinstance(value, str):
            out[key] = redact_outbound(value)[0]
        else:
            out[key] = value
    return out


def verify_audit(audit: AuditLog) -> VerifyReport:
    """:meth:`AuditLog.verify`, plus: a log file that is gone while its signed head says entries were
    written is reported (deleting the whole log is tampering too)."""
    report = audit.verify()
    if not audit.path.exists() and audit.head_path.exists():
        report.ok = False
        report.problems.append(f"{audit.path} is missing but entries were written to it (deleted log)")
    return report
