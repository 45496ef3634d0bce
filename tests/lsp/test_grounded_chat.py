"""Grounded answers through the real LSP server, with a scripted OpenAI-compatible endpoint on loopback
(``[agent] grounding = "strict"``): nothing relevant -> the fixed answer without a model request; an
uncited answer gets a recalled citation; a cited one is untouched; the reply names the model."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from mnemo.agent.grounding import NO_MEMORY
from tests.fake_chat_endpoint import Endpoint, chat_endpoint
from tests.lsp.conftest import server_config, start_with_agent, wait_ready

UNCITED = "The staging deploy failed because the migration ran before the config was loaded."
CITED = "Run migrations after config.load() [memory/2026-11-02.md#L9-L10]."
CITATION = re.compile(r"\[([^\[\]\s]+\.md)#L\d+(?:-L\d+)?\]")


def reply(messages: list[dict[str, Any]]) -> tuple[str, str]:
    question = str(messages[-1].get("content", ""))
    if "password" in question:
        return "The password is hunter2.", "stop"  # never asked: grounding answers first
    return (CITED if "migrations" in question else UNCITED), "stop"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(reply) as ep:
        yield ep


@pytest_lsp.fixture(config=server_config())
async def client(
    lsp_client: LanguageClient, tmp_path: Path, endpoint: Endpoint
) -> AsyncIterator[LanguageClient]:
    await start_with_agent(lsp_client, tmp_path, endpoint.url, grounding="strict")
    yield lsp_client
    await lsp_client.shutdown_session()


async def ask(client: LanguageClient, deltas: list[Any], message: str) -> tuple[Any, str]:
    result = await client.protocol.send_request_async("mnemo/chat", {"message": message})
    await asyncio.sleep(0.05)  # let queued notifications land
    return result, "".join(d.delta for d in deltas if d.sessionId == result.sessionId)


async def test_grounded_answers_through_the_server(client: LanguageClient, endpoint: Endpoint) -> None:
    await wait_ready(client)
    deltas: list[Any] = []
    client.feature("mnemo/chatDelta")(lambda ls, params: deltas.append(params))

    nothing, streamed = await ask(client, deltas, "What is the Wi-Fi password of the office?")
    assert nothing.text == NO_MEMORY and streamed == NO_MEMORY
    assert endpoint.requests == []  # the model was not asked
    assert nothing.grounded.action == "no-memory" and nothing.grounded.mode == "strict"
    assert nothing.chatModel.line.startswith("chat model: scripted")

    uncited, streamed = await ask(client, deltas, "Why did the staging deploy fail?")
    assert len(endpoint.requests) == 1
    assert uncited.grounded.action in ("cited", "quoted"), uncited.grounded
    shown = {c.path for c in uncited.citations}
    added = CITATION.findall(uncited.text)
    assert added and set(added) <= shown, (uncited.text, shown)  # every citation shown was recalled
    assert UNCITED in uncited.text
    if uncited.grounded.action == "cited":  # the appended citation streams after the answer
        assert streamed == uncited.text
    else:  # the quote before the answer is in the final text only
        assert uncited.text.startswith("> ") and streamed == UNCITED

    cited, streamed = await ask(client, deltas, "When do migrations run?")
    assert cited.text == CITED and streamed == CITED
    assert cited.grounded.action == "kept"
