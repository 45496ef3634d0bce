"""``[search] searches_at_once`` through the real server: searches sent together wait their turn, and
each comes back with its own answer (mnemo.memory.search_gate; issue 17)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import make_workspace, server_config, start_client, wait_ready

TOPICS = 8


@pytest_lsp.fixture(config=server_config())
async def one_at_a_time(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write("\n[search]\nsearches_at_once = 1\n")
    for i in range(TOPICS):
        (ws / "memory" / f"topic-{i}.md").write_text(
            f"# Topic {i}\n\nThe quokka number {i} keeps the key of locker {100 + i}.\n", encoding="utf-8"
        )
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_searches_sent_together_each_get_their_answer(one_at_a_time: LanguageClient) -> None:
    await wait_ready(one_at_a_time)

    async def search(i: int) -> str:
        result = await one_at_a_time.protocol.send_request_async(
            "mnemo/memorySearch", {"query": f"locker {100 + i}", "maxResults": 3}
        )
        return str(result.results[0].path)

    found = await asyncio.wait_for(asyncio.gather(*(search(i) for i in range(TOPICS))), 60)
    assert found == [f"memory/topic-{i}.md" for i in range(TOPICS)]
    status = await one_at_a_time.protocol.send_request_async("mnemo/status", {})
    assert status.state == "ready"
