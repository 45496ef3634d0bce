"""``[gateway] steering``: chat.send to a session whose turn runs goes into that turn (answered in its
reply) when on, waits in the lane as before when off, and never overtakes a message already waiting."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from mnemo.agent.providers import ChatMessage

from .conftest import login

WAIT_S = 20


class Held:
    """A scripted model: a message starting with "hold" is answered once ``release`` is set (its turn
    runs meanwhile); anything else is answered at once. Records every call's messages."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[list[str]] = []

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        last = messages[-1].content
        self.calls.append([m.content for m in messages])
        if last.startswith("hold"):
            self.entered.set()
            self.release.wait(WAIT_S)
            return "first answer"
        return "answer to: " + last


async def until(condition: Any, what: str) -> None:
    for _ in range(WAIT_S * 50):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def test_with_steering_a_message_for_a_busy_session_joins_its_turn(start_gateway: Any) -> None:
    held = Held()
    gw = await start_gateway({"steering": True}, reply=held)
    client = await login(gw.url)
    try:
        first = asyncio.ensure_future(client.chat.send(text="hold: deploy notes", peer="alice", stream=False))
        assert await asyncio.to_thread(held.entered.wait, WAIT_S)
        b = await client.chat.send(text="only staging", peer="alice", stream=False)
        c = await client.chat.send(text="and be brief", peer="alice", stream=False)
        other = await client.chat.send(
            text="hello", peer="bob", stream=False
        )  # another session: its own turn
        held.release.set()
        reply = await asyncio.wait_for(first, WAIT_S)
    finally:
        held.release.set()
        await client.close()
    assert (b["steered"], b["text"], c["steered"]) == ("injected", "", "injected")
    assert b["sessionId"] == c["sessionId"] == reply["sessionId"]
    assert other["steered"] is None and other["text"] == "answer to: hello"
    assert reply["steered"] is None
    assert reply["text"] == "first answer\n\nanswer to: and be brief"
    assert held.calls[-1][-2:] == ["only staging", "and be brief"]  # in arrival order, in the next call
    assert gw.gateway.core.stats()["handled"] == 4


async def test_without_steering_the_message_waits_in_the_lane_as_before(start_gateway: Any) -> None:
    held = Held()
    gw = await start_gateway({}, reply=held)
    client = await login(gw.url)
    try:
        first = asyncio.ensure_future(client.chat.send(text="hold: deploy notes", peer="alice", stream=False))
        assert await asyncio.to_thread(held.entered.wait, WAIT_S)
        second = asyncio.ensure_future(client.chat.send(text="only staging", peer="alice", stream=False))
        await until(lambda: gw.gateway.core.lanes.stats()["waiting"] == 1, "the second message to wait")
        held.release.set()
        one, two = await asyncio.wait_for(asyncio.gather(first, second), WAIT_S)
    finally:
        held.release.set()
        await client.close()
    assert one["text"] == "first answer" and two["text"] == "answer to: only staging"
    assert two["steered"] is None and one["sessionId"] == two["sessionId"]
    assert len(held.calls) == 2 and held.calls[1][-2:] == ["first answer", "only staging"]


async def test_steering_never_overtakes_a_message_waiting_in_the_lane(start_gateway: Any) -> None:
    """/new is never steered: it waits in the lane. A message after it must wait behind it (and so land in
    the new session), not jump into the running turn."""
    held = Held()
    gw = await start_gateway({"steering": True}, reply=held)
    client = await login(gw.url)
    lanes = gw.gateway.core.lanes
    try:
        first = asyncio.ensure_future(client.chat.send(text="hold: deploy notes", peer="alice", stream=False))
        assert await asyncio.to_thread(held.entered.wait, WAIT_S)
        new = asyncio.ensure_future(client.chat.send(text="/new", peer="alice", stream=False))
        await until(lambda: lanes.stats()["waiting"] == 1, "/new to wait in the lane")
        after = asyncio.ensure_future(client.chat.send(text="what now?", peer="alice", stream=False))
        await until(lambda: lanes.stats()["waiting"] == 2, "the next message to wait behind /new")
        held.release.set()
        a, n, c = await asyncio.wait_for(asyncio.gather(first, new, after), WAIT_S)
    finally:
        held.release.set()
        await client.close()
    assert a["text"] == "first answer" and a["steered"] is None
    assert n["freshSession"] and n["sessionId"] != a["sessionId"]
    assert c["steered"] is None and c["text"] == "answer to: what now?"
    assert c["sessionId"] == n["sessionId"]
    assert "first answer" not in held.calls[-1]  # the new session's turn does not see the old one
