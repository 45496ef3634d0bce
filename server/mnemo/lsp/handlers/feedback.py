"""mnemo/feedback: whether a chat turn's recalled memories helped (thumbs from a chat panel,
``:Mnemo feedback``); and, after each chat turn, the transcript's implicit signals (:func:`harvest`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer

log = logging.getLogger(__name__)


def harvest(ls: MnemoLanguageServer, session_id: str) -> None:
    """Record what the session's transcript says by itself (a tool call that succeeded, the next message
    going on or correcting); runs on a worker thread after a chat turn, never fails the turn."""
    from mnemo.index.duckdb_native import duckdb

    try:
        ls.core.memory.harvest_feedback(session_id)
    except (MnemoError, duckdb.Error, OSError) as exc:  # statistics: logged, never an error for the turn
        log.info("implicit feedback of session %s not recorded: %s", session_id, exc)


def register(server: MnemoLanguageServer) -> None:
    @server.feature(protocol.FEEDBACK)
    async def feedback(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.FeedbackParams.parse(params)
        from mnemo.memory.turns import FeedbackError

        try:
            result = await asyncio.to_thread(ls.core.memory.record_feedback, p.session_id, p.turn, p.useful)
        except FeedbackError as exc:  # no such session or turn
            raise JsonRpcInvalidParams(str(exc)) from exc
        except (MnemoError, OSError) as exc:
            raise protocol.RequestFailed(str(exc)) from exc
        return wire.feedback_result(result)
