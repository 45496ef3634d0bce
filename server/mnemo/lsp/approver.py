"""LspApprover: approvals answered by the editor, without ever blocking the event loop.

The gate runs on a worker thread. :meth:`LspApprover.ask` puts the request in the services'
:class:`~mnemo.policy.approvals.ApprovalQueue` (so ``mnemo/approvals`` lists it and
``mnemo/resolveApproval`` can answer it), sends ``mnemo/approvalRequest`` to the client from the event loop
(``asyncio.run_coroutine_threadsafe``) and waits on the queue with the request's timeout: whichever answer
comes first wins, no answer means deny, and a request still open on the client is cancelled
(``$/cancelRequest``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING

from lsprotocol import types

from mnemo.lsp import protocol
from mnemo.policy.approvals import ApprovalQueue, ApprovalRequest, Choice, parse_choice

if TYPE_CHECKING:
    from mnemo.lsp.server import MnemoLanguageServer
    from mnemo.policy.gate import ToolGate

log = logging.getLogger(__name__)
_approvers: weakref.WeakKeyDictionary[MnemoLanguageServer, LspApprover] = weakref.WeakKeyDictionary()


class LspApprover:
    def __init__(self, server: MnemoLanguageServer, queue: ApprovalQueue) -> None:
        self.server = server
        self.queue = queue
        queue.on_change(self._notify_changed)

    def ask(self, request: ApprovalRequest) -> Choice:
        self.queue.submit(request)
        loop = self.server.loop
        asked = None
        if loop is not None and not loop.is_closed():
            asked = asyncio.run_coroutine_threadsafe(self._ask_client(request), loop)
        try:
            return self.queue.wait(request.id, request.timeout_s)
        finally:
            if asked is not None and not asked.done():
                asked.cancel()  # answered elsewhere or timed out: withdraw the client's dialog

    async def _ask_client(self, request: ApprovalRequest) -> None:
        msg_id = f"mnemo-approval-{request.id}"
        lsp = self.server.protocol
        try:
            result = await lsp.send_request_async(protocol.APPROVAL_REQUEST, request.to_dict(), msg_id=msg_id)
        except asyncio.CancelledError:
            lsp.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise
        except Exception as exc:  # the client cannot answer: mnemo/resolveApproval or the timeout will
            log.info("client did not answer %s: %s", protocol.APPROVAL_REQUEST, exc)
            return
        raw = protocol.to_plain(result)
        try:
            choice = parse_choice(raw.get("choice") if isinstance(raw, dict) else None)
        except ValueError as exc:
            log.warning("bad answer to %s (%s): denied", protocol.APPROVAL_REQUEST, exc)
            choice = "deny"
        self.queue.resolve(request.id, choice, by="client")

    def _notify_changed(self) -> None:
        pending = len(self.queue.pending())
        self.server.post(
            lambda: self.server.protocol.notify(protocol.APPROVALS_CHANGED, {"pending": pending})
        )


def lsp_gate(server: MnemoLanguageServer) -> ToolGate:
    """The workspace's ToolGate asking this server's client (what the chat handler should use too)."""
    core = server.core
    approver = _approvers.get(server)
    if approver is None or approver.queue is not core.approvals:
        approver = _approvers[server] = LspApprover(server, core.approvals)
    return core.tool_gate(approver)
