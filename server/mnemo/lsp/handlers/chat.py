"""mnemo/chat (streamed as mnemo/chatDelta), mnemo/steer, sessions, /new, /reset, the memory flush and
its command.

Each request is one call into :class:`mnemo.agent.Agent` on a worker thread. ``$/cancelRequest``
cancels the handler's task; the agent's cancel event is then set, and generation stops at the next token.
``mnemo/steer`` hands a message to the turn a ``mnemo/chat`` of the same session is running.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.lsp import protocol
from mnemo.lsp.handlers import feedback
from mnemo.lsp.server import MnemoLanguageServer

if TYPE_CHECKING:  # the agent and NumPy load on the first chat, after `initialize` is answered
    from mnemo.agent import Agent

log = logging.getLogger(__name__)


async def _agent(ls: MnemoLanguageServer) -> Agent:
    return await asyncio.to_thread(lambda: ls.core.agent)


async def _call(fn: Any, *args: Any, stop: threading.Event | None = None, **kwargs: Any) -> Any:
    """Run a core call on a thread; core errors become JSON-RPC errors; a cancelled request sets ``stop``."""
    from mnemo.agent import SessionError
    from mnemo.embeddings import EmbeddingError

    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except asyncio.CancelledError:
        if stop is not None:
            stop.set()
        raise
    except SessionError as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc
    except (MnemoError, EmbeddingError, OSError) as exc:
        raise protocol.RequestFailed(str(exc)) from exc


def session_code_actions(ls: MnemoLanguageServer, uri: str) -> list[types.CodeAction]:
    """ "Flush this session's memory" on an open transcript (``sessions/<id>.jsonl``)."""
    from mnemo.agent.sessions import session_id_of  # the agent package loads on the first chat

    rel = ls.core.workspace.rel_from_uri(uri) if ls.services is not None else None
    session_id = session_id_of(rel) if rel is not None else None
    if session_id is None:
        return []
    return [
        types.CodeAction(
            title="mnemo: save this session's durable memories (flush)",
            kind=types.CodeActionKind.Source,
            command=types.Command(
                title="Flush session memory",
                command=protocol.CMD_FLUSH,
                arguments=[{"sessionId": session_id}],
            ),
        )
    ]


def register(server: MnemoLanguageServer) -> None:
    @server.feature(protocol.CHAT)
    async def chat(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.ChatParams.parse(params)
        agent = await _agent(ls)
        session_id = await _call(agent.open_session, p.session_id, p.kind)
        request_id = ls.protocol.msg_id
        cancel = threading.Event()

        def on_delta(delta: str) -> None:
            note = {"sessionId": session_id, "requestId": request_id, "delta": delta}
            ls.post(lambda: ls.protocol.notify(protocol.CHAT_DELTA, note))

        reply = await _call(
            agent.chat, p.message, session_id, kind=p.kind, on_delta=on_delta, cancel=cancel, stop=cancel
        )
        # The transcript's implicit feedback (kept / corrected / tool), off the reply's path.
        threading.Thread(target=feedback.harvest, args=(ls, session_id), daemon=True).start()
        return wire.chat_reply(reply)

    @server.feature(protocol.STEER)
    async def steer(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.SteerParams.parse(params)
        agent = await _agent(ls)
        return {"state": await _call(agent.steer, p.session_id, p.message)}

    @server.feature(protocol.SESSIONS)
    async def sessions(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        agent = await _agent(ls)
        return wire.sessions(await _call(agent.sessions))

    @server.feature(protocol.NEW_SESSION)
    async def new_session(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.SessionParams.parse(params, require_session=False)
        agent = await _agent(ls)
        return wire.new_session(await _call(agent.new_session, p.kind, p.previous or p.session_id))

    @server.feature(protocol.RESET_SESSION)
    async def reset_session(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.SessionParams.parse(params)
        agent = await _agent(ls)
        return wire.new_session(await _call(agent.reset_session, p.session_id))

    @server.feature(protocol.FLUSH)
    async def flush(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.FlushParams.parse(params)
        agent = await _agent(ls)
        cancel = threading.Event()
        report = await _call(agent.flush, p.session_id, cancel, dry_run=p.dry_run, stop=cancel)
        return wire.flush_report(report)

    @server.command(protocol.CMD_FLUSH)
    async def flush_command(ls: MnemoLanguageServer, *args: Any) -> dict[str, Any]:
        return await flush(ls, args[0] if args else {})

    if types.TEXT_DOCUMENT_CODE_ACTION in server.protocol.fm.features:
        # The editor actions module owns textDocument/codeAction; it can offer session_code_actions.
        return

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.Source]),
    )
    def code_actions(ls: MnemoLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return session_code_actions(ls, params.text_document.uri)
