"""mnemo/memorySearch ``filters`` through the real server (issue 18, point 10)."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from tests.lsp.conftest import wait_ready

QUERY = "PostgreSQL billing"


async def _paths(client: LanguageClient, filters: dict) -> list[str]:  # type: ignore[type-arg]
    result = await client.protocol.send_request_async(
        "mnemo/memorySearch", {"query": QUERY, "maxResults": 6, "filters": filters}
    )
    return [r.path for r in result.results]


async def test_filters_over_lsp(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    everything = await _paths(keyword_client, {})
    assert {"MEMORY.md", "memory/2026-11-02.md"} <= set(everything)
    assert set(await _paths(keyword_client, {"kinds": ["memory"]})) == {"MEMORY.md"}
    assert set(await _paths(keyword_client, {"kinds": ["daily"]})) == {"memory/2026-11-02.md"}
    assert set(await _paths(keyword_client, {"since": "2026-11-01", "until": "2026-11-02"})) == {
        "memory/2026-11-02.md"
    }
    assert await _paths(keyword_client, {"since": "2026-11-03"}) == []


async def test_bad_filters_answer_invalid_params(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    with pytest.raises(JsonRpcInvalidParams, match="YYYY-MM-DD"):
        await _paths(keyword_client, {"since": "last October"})
    with pytest.raises(JsonRpcInvalidParams, match="unknown kind"):
        await _paths(keyword_client, {"kinds": ["notes"]})
