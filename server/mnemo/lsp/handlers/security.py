"""``mnemo/securityAudit``: the workspace's security audit (:mod:`mnemo.security.audit`) over LSP."""

from __future__ import annotations

import asyncio
from typing import Any

from mnemo import wire
from mnemo.lsp.protocol import SECURITY_AUDIT
from mnemo.lsp.server import MnemoLanguageServer


def register(server: MnemoLanguageServer) -> None:
    @server.feature(SECURITY_AUDIT)
    async def audit(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        from mnemo.lsp.approver import lsp_gate  # the policy and audit modules load on first use
        from mnemo.security.audit import AuditInputs, security_audit

        services = ls.core
        inputs = AuditInputs(services.workspace.root, services.settings, lsp_gate(ls).audit)
        report = await asyncio.to_thread(security_audit, inputs)
        return wire.security_report(report)
