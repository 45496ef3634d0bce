"""Approvals answered by the editor, without ever blocking the event loop.

Every gate of the workspace asks the services' :class:`~mnemo.policy.approvals.ApprovalQueue` (so
``mnemo/approvals`` lists each request and ``mnemo/resolveApproval`` can answer it); the worker thread
that runs the gate waits on the queue with the request's timeout. :class:`LspApprovals` is installed on
that queue as an asker: for each submitted request it sends ``mnemo/approvalRequest`` to the client from
the event loop (``asyncio.run_coroutine_threadsafe``) and resolves the queue with the answer. Whichever
answer comes first wins, no answer means deny, and a dialog still open on the client is withdrawn
(``$/cancelRequest``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types

from mnemo import wire
from mnemo.lsp import protocol
from mnemo.policy.approvals import ApprovalQueue, ApprovalRequest, parse_choice

if TYPE_CHECKING:
    from mnemo.lsp.server import MnemoLanguageServer
    from mnemo.policy.gate import ToolGate

log = logging.getLogger(__name__)
_installed: weakref.WeakKeyDictionary[MnemoLanguageServer, LspApprovals] = weakref.WeakKeyDictionary()


class LspApprovals:
    def __init__(self, server: MnemoLanguageServer, queue: ApprovalQueue) -> None:
        self.server = server
        self.queue = queue
        queue.add_asker(self._forward)
        queue.on_change(self._notify_changed)

    def _forward(self, request: ApprovalRequest) -> Callable[[], object] | None:
        loop = self.server.loop
        if loop is None or loop.is_closed():
            return None
        asked = asyncio.run_coroutine_threadsafe(self._ask_client(request), loop)
        return asked.cancel  # answered elsewhere or timed out: withdraw the client's dialog

    async def _ask_client(self, request: ApprovalRequest) -> None:
        msg_id = f"mnemo-approval-{request.id}"
        lsp = self.server.protocol
        try:
            result = await lsp.send_request_async(
                protocol.APPROVAL_REQUEST, wire.approval_request(request), msg_id=msg_id
            )
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


def install_lsp_approvals(server: MnemoLanguageServer) -> None:
    """Make the client the approver of every gate of this workspace (idempotent). Call it before the
    first tool call (the chat handler: before the first turn)."""
    queue = server.core.approvals
    current = _installed.get(server)
    if current is None or current.queue is not queue:
        _installed[server] = LspApprovals(server, queue)


def lsp_gate(server: MnemoLanguageServer) -> ToolGate:
    """The workspace's ToolGate, with approvals asked of this server's client."""
    install_lsp_approvals(server)
    return server.core.tool_gate()
