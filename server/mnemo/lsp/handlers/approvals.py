"""Policy and approvals over LSP: mnemo/exec, mnemo/approvals, mnemo/resolveApproval, mnemo/auditVerify,
mnemo/riskStatus. The approval dialog itself is the server -> client request mnemo/approvalRequest
(see :mod:`mnemo.lsp.approver`)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

from mnemo import wire
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer

# The policy modules load on first use (each handler imports what it needs), not before `initialize`.


def register(server: MnemoLanguageServer) -> None:
    @server.feature(protocol.EXEC)
    async def exec_command(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        from mnemo.lsp.approver import lsp_gate

        p = protocol.ExecParams.parse(params)
        gate = lsp_gate(ls)
        outcome = await asyncio.to_thread(
            gate.call, p.session, "exec", {"command": p.command}, approval_timeout_s=p.approval_timeout_s
        )
        result = asdict(outcome)
        result["exitCode"] = result.pop("exit_code")
        return result

    @server.feature(protocol.APPROVALS)
    def approvals(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        return {"approvals": [wire.approval_request(request) for request in ls.core.approvals.pending()]}

    @server.feature(protocol.RESOLVE_APPROVAL)
    def resolve_approval(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        from mnemo.policy.approvals import parse_choice

        p = protocol.ResolveApprovalParams.parse(params)
        resolved = ls.core.approvals.resolve(p.id, parse_choice(p.choice), by="resolveApproval")
        return {"resolved": resolved, **({} if resolved else {"message": f"no pending approval {p.id}"})}

    @server.feature(protocol.AUDIT_VERIFY)
    async def audit_verify(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        from mnemo.lsp.approver import lsp_gate
        from mnemo.policy.gate import verify_audit

        audit = lsp_gate(ls).audit
        report = await asyncio.to_thread(verify_audit, audit)
        return {
            "ok": report.ok,
            "entries": report.entries,
            "problems": report.problems,
            "path": str(audit.path),
        }

    @server.feature(protocol.RISK_STATUS)
    async def risk_status(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        from mnemo.lsp.approver import lsp_gate

        return await asyncio.to_thread(lsp_gate(ls).risk_status)
