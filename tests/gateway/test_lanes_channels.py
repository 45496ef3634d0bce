"""Lanes under concurrent messages, group sessions, the webhook channel and the bind check."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
import pytest

from mnemo.agent.providers import ChatMessage
from mnemo.gateway.channels.webhook import sign
from mnemo.gateway.lanes import Lanes
from mnemo.gateway.server import BindRefused, check_bind

from .conftest import WEBHOOK_SECRET, login


class Recorder:
    """A scripted model that takes a while per turn and records when each turn ran."""

    def __init__(self, seconds: float = 0.15) -> None:
        self.seconds = seconds
        self.spans: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        text = messages[-1].content
        start = time.monotonic()
        time.sleep(self.seconds)
        with self.lock:
            self.spans.append((text, start, time.monotonic()))
        return "done " + text


async def test_one_session_runs_in_order_and_sessions_run_side_by_side(start_gateway: Any) -> None:
    recorder = Recorder()
    gw = await start_gateway({"max_concurrent": 4}, reply=recorder)
    client = await login(gw.url)
    try:
        sends = [client.chat.send(text=f"a{i}", peer="alice", stream=False) for i in range(4)]
        sends += [client.chat.send(text=f"b{i}", peer="bob", stream=False) for i in range(4)]
        replies = await asyncio.gather(*sends)
    finally:
        await client.close()
    assert [r["text"] for r in replies[:4]] == [f"done a{i}" for i in range(4)]
    for peer in "ab":
        spans = [s for s in recorder.spans if s[0].startswith(peer)]
        assert [s[0] for s in sorted(spans, key=lambda s: s[1])] == [f"{peer}{i}" for i in range(4)]
        ordered = sorted(spans, key=lambda s: s[1])
        for earlier, later in itertools.pairwise(ordered):
            assert later[1] >= earlier[2], "two turns of one session overlapped"
    alice = [s for s in recorder.spans if s[0].startswith("a")]
    bob = [s for s in recorder.spans if s[0].startswith("b")]
    assert any(a[1] < b[2] and b[1] < a[2] for a in alice for b in bob), "sessions never ran at the same time"
    assert (
        len({r["sessionId"] for r in replies[:4]}) == 1 and replies[0]["sessionId"] != replies[4]["sessionId"]
    )


async def test_an_abandoned_turn_holds_its_lane_until_its_worker_ends() -> None:
    """A turn whose caller gave up (the turn timeout, a client gone) runs on in its worker thread until it
    sees the cancel between tokens. Its lane was freed at once: the session's next turn ran beside it,
    and with steering on, the message after that was "injected" into the abandoned turn and never
    answered."""
    lanes = Lanes(max_concurrent=2, queue_limit=5)
    release = threading.Event()
    ran: list[str] = []

    def slow() -> None:
        release.wait(30)
        ran.append("abandoned")

    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lanes.run("s", slow), timeout=0.1)
        assert not lanes.steerable("s"), "a message could join a turn nobody waits for"
        following = asyncio.ensure_future(lanes.run("s", lambda: ran.append("next")))
        await asyncio.sleep(0.2)
        assert ran == [] and not following.done(), "the next turn ran beside the abandoned one"
        assert lanes.stats()["waiting"] == 1
        release.set()
        await asyncio.wait_for(following, timeout=30)
        assert ran == ["abandoned", "next"]
        assert lanes.stats()["lanes"] == 0 and lanes.stats()["completed"] == 2
    finally:
        release.set()
        lanes.close()


async def test_a_full_lane_refuses_with_a_clear_error(start_gateway: Any) -> None:
    from jsonrpc_base import ProtocolError

    from mnemo.gateway.rpc import BUSY

    gw = await start_gateway({"queue_limit": 1}, reply=Recorder(0.3))
    client = await login(gw.url)
    try:
        results = await asyncio.gather(
            *[client.chat.send(text=f"m{i}", peer="p", stream=False) for i in range(4)],
            return_exceptions=True,
        )
    finally:
        await client.close()
    refused = [r for r in results if isinstance(r, ProtocolError)]
    assert refused and all(r.args[0] == BUSY for r in refused)
    assert any(isinstance(r, dict) for r in results)


async def test_group_sessions_never_see_memory_md(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url)
    try:
        private = await client.chat.send(text="coffee?", peer="me", stream=False)
        private_system = gw.provider.calls[-1][0].content
        group = await client.chat.send(text="coffee?", peer="me", group=True, groupId="team", stream=False)
        group_system = gw.provider.calls[-1][0].content
    finally:
        await client.close()
    assert private["kind"] == "private" and "dark roast" in private_system
    assert group["kind"] == "group" and "dark roast" not in group_system and "MEMORY.md" not in group_system
    header = json.loads((gw.root / "sessions" / f"{group['sessionId']}.jsonl").read_text().splitlines()[0])
    assert header["kind"] == "group"


async def test_replies_stream_as_notifications_and_history_and_new(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url)
    deltas: list[str] = []
    client.chat.delta = lambda **params: deltas.append(params["delta"])
    try:
        reply = await client.chat.send(text="hello there", peer="me")
        await asyncio.sleep(0.1)
        assert "".join(deltas).strip() == reply["text"] == "echo: hello there"
        history = await client.chat.history(sessionKey=reply["sessionKey"])
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
        fresh = await client.chat.send(text="/new", peer="me")
        assert fresh["freshSession"] and fresh["sessionId"] != reply["sessionId"]
        listed = await client.sessions.list()
        assert listed["sessions"][0]["sessionKey"] == reply["sessionKey"]
    finally:
        await client.close()


async def _post(base: str, body: bytes, headers: dict[str, str], account: str = "ci") -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/hooks/{account}", data=body, headers=headers) as r,
    ):
        return r.status, await r.json()


def _signed(body: bytes, secret: str = WEBHOOK_SECRET, ts: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if ts is None else ts)
    return {
        "X-Mnemo-Timestamp": stamp,
        "X-Mnemo-Signature": sign(secret, stamp, body),
        "Content-Type": "application/json",
    }


async def test_webhook_answers_signed_requests_and_refuses_the_rest(start_gateway: Any) -> None:
    gw = await start_gateway({"auth": {"max_failures": 2}})
    body = json.dumps({"peer": "build-bot", "text": "deploy status?"}).encode()
    status, reply = await _post(gw.base, body, _signed(body))
    assert status == 200 and reply["text"] == "echo: deploy status?"
    assert reply["sessionKey"] == "agent:main:webhook:ci:dm:build-bot"
    status, _ = await _post(gw.base, body, _signed(body, secret="wrong"))
    assert status == 401
    status, _ = await _post(gw.base, body, _signed(body, ts=int(time.time()) - 3600))
    assert status == 401
    status, _ = await _post(gw.base, body, _signed(body))  # two failures: this address is now limited
    assert status == 429
    bad = b'{"peer": "x"}'
    gw.gateway.auth.limiter._failures.clear()
    status, err = await _post(gw.base, bad, _signed(bad))
    assert status == 400 and "required" in err["error"]


async def test_webhook_channel_stays_off_without_a_secret(
    start_gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MNEMO_WEBHOOK_SECRET")
    gw = await start_gateway()
    states = {s["name"]: s for s in gw.gateway.channel_states()}
    assert states["webhook"]["state"] == "off" and "MNEMO_WEBHOOK_SECRET" in states["webhook"]["problem"]
    body = b'{"peer": "a", "text": "b"}'
    async with aiohttp.ClientSession() as http, http.post(f"{gw.base}/hooks/x", data=body) as r:
        assert r.status == 404


def test_public_bind_needs_configured_auth() -> None:
    check_bind("127.0.0.1", False)
    check_bind("::1", False)
    check_bind("localhost", False)
    with pytest.raises(BindRefused, match="MNEMO_GATEWAY_TOKEN"):
        check_bind("0.0.0.0", False)
    check_bind("0.0.0.0", True)


async def test_the_after_turn_hook_sees_each_reply(start_gateway: Any) -> None:
    gw = await start_gateway()
    seen: list[Any] = []
    gw.gateway.core.after_turn = seen.append
    client = await login(gw.url)
    try:
        await client.chat.send(text="one", peer="p", stream=False)
    finally:
        await client.close()
    assert [r.text for r in seen] == ["echo: one"]
