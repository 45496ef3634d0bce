"""``mnemo/indexStatus`` while the server indexes: a few a second and the final state once, not one per
file (each reads the index's counts on the event loop, where requests wait)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_lsp
from pytest_lsp import LanguageClient

from tests.lsp.conftest import make_workspace, server_config, start_client, wait_ready

NOTES = 400


@pytest_lsp.fixture(config=server_config())
async def busy_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    for i in range(NOTES):
        (ws / "memory" / f"topic-{i:04d}.md").write_text(
            f"# Topic {i}\n\nThe quokka number {i} likes deployments on day {i % 7}.\n", encoding="utf-8"
        )
    lsp_client.seen = []  # type: ignore[attr-defined]

    @lsp_client.feature("mnemo/indexStatus")
    def _status(params: Any) -> None:
        lsp_client.seen.append(params)  # type: ignore[attr-defined]

    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_index_status_is_sent_a_few_times_a_second_not_per_file(busy_client: LanguageClient) -> None:
    await wait_ready(busy_client)
    seen: list[Any] = busy_client.seen  # type: ignore[attr-defined]
    for _ in range(100):  # the final notification may trail the status reply
        if seen and seen[-1].state == "ready" and seen[-1].files >= NOTES:
            break
        await asyncio.sleep(0.05)
    assert seen and seen[-1].state == "ready" and seen[-1].files >= NOTES
    assert len(seen) < NOTES // 4, f"{len(seen)} status notifications for {NOTES} files"
    finals = [s for s in seen if s.state == "ready" and s.files >= NOTES]
    assert len(finals) == 1, f"the final state was sent {len(finals)} times"
