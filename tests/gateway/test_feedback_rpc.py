"""The gateway's ``chat.feedback`` (issue 18, point 8): in the gateway's own process, and in a gateway that
follows an editor's index writer (the feedback crosses the index-sharing socket to the writer)."""

from __future__ import annotations

from typing import Any

import pytest
from jsonrpc_base import ProtocolError

from mnemo.editor.insights import FeedbackStats, file_chunk_stats
from mnemo.services import Services
from mnemo.wire import feedback_result

from .conftest import PASSWORD, login
from .test_follower_recall import editor, endpoint, follower_gateway  # noqa: F401 - fixtures

INVALID_PARAMS, FORBIDDEN = -32602, -32001


def _code(info: pytest.ExceptionInfo[ProtocolError]) -> int:
    return int(info.value.args[0])


async def test_chat_feedback_is_recorded_on_the_turns_chunks(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url, "password", PASSWORD)
    try:
        reply = await client.chat.send(text="billing database PostgreSQL", peer="ana", stream=False)
        key = reply["sessionKey"]
        done = await client.chat.feedback(sessionKey=key, useful=True)
        assert (done["turn"], done["useful"], done["signal"]) == (1, True, "explicit")
        assert "MEMORY.md" in {c["path"] for c in done["chunks"]}
        again = await client.chat.feedback(sessionKey=key, turn=1, useful=False)
        assert again["useful"] is False
        for bad in (
            {"sessionKey": "no:such:key", "useful": True},
            {"sessionKey": key, "useful": "yes"},
            {"sessionKey": key, "turn": 0, "useful": True},
            {"sessionKey": key, "turn": 7, "useful": True},
        ):
            with pytest.raises(ProtocolError) as info:
                await client.chat.feedback(**bad)
            assert _code(info) == INVALID_PARAMS, bad
    finally:
        await client.close()
    with gw.gateway.memory.indexer.reading() as reader:
        tallies = [c for c in file_chunk_stats(reader, "MEMORY.md") if isinstance(c, FeedbackStats)]
    assert sorted((t.useful, t.not_useful) for t in tallies) == [(0, 1)] * len(tallies) and tallies


async def test_a_guest_may_not_give_feedback(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url, "password", PASSWORD, role="guest")
    try:
        with pytest.raises(ProtocolError) as info:
            await client.chat.feedback(sessionKey="agent:main:main", useful=True)
        assert _code(info) == FORBIDDEN
    finally:
        await client.close()


async def test_a_follower_gateways_feedback_reaches_the_writer(
    follower_gateway: str,  # noqa: F811 - the imported fixture
    editor: Services,  # noqa: F811
) -> None:
    client = await login(follower_gateway)
    try:
        reply = await client.chat.send(text="Where does the zebrafinch nest?", peer="ana", stream=False)
        done = await client.chat.feedback(sessionKey=reply["sessionKey"], useful=True)
    finally:
        await client.close()
    assert "memory/birds.md" in {c["path"] for c in done["chunks"]}
    insight = editor.editor.insight("memory/birds.md", 3)
    assert insight is not None and (insight.useful, insight.not_useful) == (1, 0)
    # The result crossed the socket as the same type the writer made.
    assert feedback_result(editor.memory.record_feedback(reply["sessionId"], 1, True)) == done
