"""Through the real LSP server, with a scripted OpenAI-compatible endpoint on loopback (no model):
a looping reply stops with finishReason "loop"; mnemo/flush checks items and honours dryRun; empty
recall tells the model to say it does not know."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from tests.fake_chat_endpoint import Endpoint, chat_endpoint
from tests.lsp.conftest import server_config, start_with_agent, wait_ready

WRONG = "The billing service uses CockroachDB for everything."
FACT = "Remember this: the deploy runs on Fridays after the release review."
KEPT = "The deploy runs on Fridays after the release review."


def reply(messages: list[dict[str, Any]]) -> tuple[str, str]:
    if str(messages[0].get("content", "")).startswith("You are saving durable memories"):
        return f"- {KEPT}\n- What day is the deploy?\n- {WRONG}", "stop"
    if "database" in str(messages[-1].get("content", "")):
        return " ".join([WRONG] * 40), "length"
    return "Noted.", "stop"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(reply) as ep:
        yield ep


@pytest_lsp.fixture(config=server_config())
async def client(
    lsp_client: LanguageClient, tmp_path: Path, endpoint: Endpoint
) -> AsyncIterator[LanguageClient]:
    ws = await start_with_agent(lsp_client, tmp_path, endpoint.url)
    lsp_client.ws = ws  # type: ignore[attr-defined]
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_loop_stops_the_reply_and_flush_checks_items(
    client: LanguageClient, endpoint: Endpoint
) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    send = client.protocol.send_request_async
    looped = await send("mnemo/chat", {"message": "Which database do we use? The quarterly zebra audit."})
    assert looped.finishReason == "loop"
    assert looped.text == WRONG
    sid = looped.sessionId
    noted = await send("mnemo/chat", {"message": FACT, "sessionId": sid})
    assert noted.text == "Noted."

    note = ws / "memory" / f"{date.today().isoformat()}.md"
    before = note.read_bytes() if note.exists() else None
    dry = await send("mnemo/flush", {"sessionId": sid, "dryRun": True})
    assert dry.dryRun is True and dry.written == []
    assert [i.text for i in dry.items] == [KEPT] and dry.items[0].turn == 2
    reasons = {r.text: r.reason for r in dry.rejected}
    assert "question" in reasons["What day is the deploy?"]
    assert "model's own answer" in reasons[WRONG]
    assert (note.read_bytes() if note.exists() else None) == before

    real = await send("mnemo/flush", {"sessionId": sid})
    assert real.dryRun is False and real.written == [f"memory/{note.name}"] and real.kept == 1
    assert f"- {KEPT} <!-- session:{sid} turn:2 -->" in note.read_text(encoding="utf-8")
    events = [json.loads(x) for x in (ws / "sessions" / f"{sid}.jsonl").read_text().splitlines() if x]
    assert [e["type"] for e in events].count("flush") == 1  # the dry run recorded nothing


async def test_empty_recall_is_said_in_the_context(client: LanguageClient, endpoint: Endpoint) -> None:
    await wait_ready(client)
    await client.protocol.send_request_async("mnemo/chat", {"message": "quarterly zebra audit xylophone"})
    system = endpoint.requests[-1]["messages"][0]["content"]
    assert "Memory search found nothing relevant" in system
