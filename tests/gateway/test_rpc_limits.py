"""Bounded input over the gateway's JSON-RPC: bad from / lines / maxResults answer INVALID_PARAMS.

(Long queries: the gateway refuses those over gateway.max_query_chars itself; the core cuts the rest.)
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonrpc_base import ProtocolError

from mnemo.gateway.rpc import INVALID_PARAMS

from .conftest import login


async def test_memory_bounds_are_invalid_params(start_gateway: Any) -> None:
    gw = await start_gateway()
    client = await login(gw.url)
    try:
        for bad in (0, -1, 201, 10**12, "5", 2.5, True):
            with pytest.raises(ProtocolError) as exc:
                await client.memory.search(query="billing", maxResults=bad)
            assert int(exc.value.args[0]) == INVALID_PARAMS, (bad, exc.value)
            assert "maxResults" in str(exc.value)
        for extra in (
            {"lines": -3},
            {"lines": 0},
            {"from": 0},
            {"from": -1},
            {"lines": "ten"},
            {"from": 10**12},
        ):
            with pytest.raises(ProtocolError) as exc:
                await client.memory.get(path="MEMORY.md", **extra)
            assert int(exc.value.args[0]) == INVALID_PARAMS, (extra, exc.value)
        got = await client.memory.get(path="MEMORY.md", **{"from": 1, "lines": 1})
        assert got["lines"] == 1 and got["text"] == "# Memory"
        hits = await client.memory.search(query="PostgreSQL", maxResults=200)
        assert hits["results"]  # the bounds themselves are accepted
    finally:
        await client.close()
