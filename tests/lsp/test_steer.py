"""mnemo/steer through the real LSP server, with a scripted OpenAI-compatible endpoint on loopback: a
message steered into a running mnemo/chat reaches the model's next call and is answered in the same
reply; with no turn running the answer is "idle"; $/cancelRequest still stops a steered turn."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.fake_chat_endpoint import Endpoint, chat_endpoint
from tests.lsp.conftest import server_config, start_with_agent, wait_ready

HOLD = "hold on while I look"
FIRST = "Here is everything about the deploy."
STEER = "only the staging part please"
STEERED = "Staging: the migration ran before the config loaded."
WAIT_S = 30


class Model:
    """Answers a message containing HOLD only once ``release`` is set (the turn is running meanwhile);
    a steering message (the newest) gets STEERED."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: list[dict[str, Any]]) -> tuple[str, str]:
        last = str(messages[-1].get("content", ""))
        if last == STEER:
            return STEERED, "stop"
        if HOLD in last:
            self.entered.set()
            self.release.wait(WAIT_S)
        return FIRST, "stop"


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
def endpoint(model: Model) -> Iterator[Endpoint]:
    with chat_endpoint(model) as ep:
        yield ep
    model.release.set()


@pytest_lsp.fixture(config=server_config())
async def client(
    lsp_client: LanguageClient, tmp_path: Path, endpoint: Endpoint
) -> AsyncIterator[LanguageClient]:
    ws = await start_with_agent(lsp_client, tmp_path, endpoint.url, grounding="off")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    yield lsp_client
    await lsp_client.shutdown_session()


def events(ws: Path, session_id: str) -> list[dict[str, Any]]:
    text = (ws / "sessions" / f"{session_id}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def test_steering_a_running_chat_and_cancelling_one(
    client: LanguageClient, endpoint: Endpoint, model: Model
) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    send = client.protocol.send_request_async
    deltas: list[str] = []
    client.feature("mnemo/chatDelta")(lambda ls, params: deltas.append(params.delta))
    sid = (await send("mnemo/newSession", {})).sessionId
    assert (await send("mnemo/steer", {"sessionId": sid, "message": STEER})).state == "idle"

    chat = asyncio.ensure_future(send("mnemo/chat", {"sessionId": sid, "message": f"{HOLD}: deploy notes"}))
    assert await asyncio.to_thread(model.entered.wait, WAIT_S)
    steered = await send("mnemo/steer", {"sessionId": sid, "message": STEER})
    assert steered.state == "injected"
    model.release.set()
    reply = await asyncio.wait_for(chat, WAIT_S)

    assert reply.text == f"{FIRST}\n\n{STEERED}"
    assert endpoint.requests[-1]["messages"][-1]["content"] == STEER
    await asyncio.sleep(0)  # let queued notifications land
    assert "".join(deltas) == reply.text
    kinds = [(e["type"], e.get("steering")) for e in events(ws, sid)]
    assert kinds[-4:] == [("user", None), ("assistant", None), ("user", True), ("assistant", None)]
    assert (await send("mnemo/steer", {"sessionId": sid, "message": STEER})).state == "idle"
    with pytest.raises(Exception, match="message"):
        await send("mnemo/steer", {"sessionId": sid})

    # Cancel as before: the steered turn stops; the steering is kept, marked unanswered.
    model.entered.clear()
    model.release.clear()
    calls = len(endpoint.requests)
    future = client.protocol.send_request(
        "mnemo/chat", {"sessionId": sid, "message": f"{HOLD}: again"}, msg_id="chat-cancel"
    )
    assert await asyncio.to_thread(model.entered.wait, WAIT_S)
    assert (await send("mnemo/steer", {"sessionId": sid, "message": "never mind"})).state == "injected"
    client.protocol.notify("$/cancelRequest", types.CancelParams(id="chat-cancel"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wrap_future(future)
    model.release.set()
    for _ in range(WAIT_S * 20):
        last = events(ws, sid)[-1]
        if last.get("answered") is False:
            break
        await asyncio.sleep(0.05)
    assert (last["type"], last["text"], last["steering"]) == ("user", "never mind", True)
    assert len(endpoint.requests) == calls + 1  # no model call for the steering after the cancel
