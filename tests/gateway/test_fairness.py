"""A fair gateway (issue 14, reproduction 6): size limits, per-user memory slots, and a DuckDB failure
answered as an error while the process goes on serving.

The memory service is a stand-in (a slow search held on an event, a search raising DuckDB's own
exception) behind the real :class:`Gateway` and its aiohttp app on a loopback port.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from jsonrpc_base import ProtocolError
from jsonrpc_websocket import Server

from mnemo.agent import ChatReply
from mnemo.gateway.auth import client_proof
from mnemo.gateway.rpc import BUSY, INVALID_PARAMS, SERVER_ERROR
from mnemo.gateway.server import Gateway
from mnemo.gateway.settings import gateway_settings_from_dict
from mnemo.memory.reading import FileLines
from mnemo.search.results import ScoreParts, SearchHit, SearchOutcome

from .conftest import TOKEN

BIG = 200_000


def outcome(query: str) -> SearchOutcome:
    hit = SearchHit(1, "key", "MEMORY.md", "memory", 1, 1, "", "", ScoreParts(None, 1.0, 1.0, 1.0, 1.0, 1.0))
    return SearchOutcome([hit], "keyword", "none", "", query[:20])


class StandInMemory:
    """``slow`` waits for ``release``; ``explode`` raises what DuckDB raised in the reported run."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)

    def search(self, query: str, *, max_results: int | None = None, filters: Any = None) -> SearchOutcome:
        if query.startswith("slow"):
            self.started.release()
            self.release.wait(30)
        if query == "explode":
            raise duckdb.InternalException(
                "INTERNAL Error: Failed to add to the HNSW index: Duplicate keys not allowed"
            )
        return outcome(query)

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> FileLines:
        return FileLines(path, 1, 0, 0, "")

    def status(self) -> Any:
        raise AssertionError("not asked")


class NoAgent:
    def chat(self, message: str, session_id: str | None = None, **_: Any) -> ChatReply:
        return ChatReply("ok", session_id or "stand-in")


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[str, StandInMemory]]:
    settings, problems = gateway_settings_from_dict(
        {"max_query_chars": 1000, "max_message_chars": 5000, "max_memory_calls_per_user": 2},
        {"MNEMO_GATEWAY_TOKEN": TOKEN},
    )
    assert problems == []
    settings.auth.pbkdf2_iterations = 1000
    memory = StandInMemory()
    gw = Gateway(tmp_path, settings, NoAgent(), memory, tmp_path / "sessions.json")
    port = await gw.start("127.0.0.1", 0)
    try:
        yield f"ws://127.0.0.1:{port}/rpc", memory
    finally:
        memory.release.set()
        await gw.stop()


async def login_as(url: str, name: str) -> Server:
    server = Server(url)
    await server.ws_connect()
    challenge = await server.auth.challenge()
    proof = client_proof("token", TOKEN, challenge["nonce"], challenge["salt"], challenge["iterations"])
    await server.auth.login(method="token", proof=proof, name=name)
    return server


async def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(ProtocolError) as info:
        await call
    return int(info.value.args[0]), str(info.value.args[1])


async def test_oversized_query_and_message_are_refused_with_the_limit(
    gateway: tuple[str, StandInMemory],
) -> None:
    url, _ = gateway
    ana = await login_as(url, "ana")
    try:
        started = time.perf_counter()
        code, message = await error_of(ana.memory.search(query="x" * BIG))
        assert code == INVALID_PARAMS and "200000 characters" in message and "max_query_chars" in message
        code, message = await error_of(ana.chat.send(text="y" * BIG))
        assert code == INVALID_PARAMS and "max_message_chars" in message
        assert time.perf_counter() - started < 5
        assert (await ana.memory.search(query="x" * 1000))["results"]  # at the limit: fine
    finally:
        await ana.close()


async def test_one_users_slow_searches_do_not_block_another(gateway: tuple[str, StandInMemory]) -> None:
    url, memory = gateway
    ana, bo = await login_as(url, "ana"), await login_as(url, "bo")
    try:
        slow = [asyncio.ensure_future(ana.memory.search(query=f"slow {i}")) for i in range(2)]
        for _ in range(2):
            assert await asyncio.to_thread(memory.started.acquire, True, 10)
        code, message = await error_of(ana.memory.search(query="a third one"))
        assert code == BUSY and "busy" in message and "limit 2" in message
        started = time.perf_counter()
        assert (await asyncio.wait_for(bo.memory.search(query="small"), 10))["results"]
        assert time.perf_counter() - started < 5, "bo waited for ana's searches"
        assert not any(task.done() for task in slow)
        memory.release.set()
        for task in slow:
            assert (await asyncio.wait_for(task, 10))["results"]
        assert (await ana.memory.search(query="again"))["results"], "ana's slots are given back"
    finally:
        await ana.close()
        await bo.close()


async def test_a_duckdb_failure_is_an_error_and_the_gateway_goes_on(
    gateway: tuple[str, StandInMemory], caplog: pytest.LogCaptureFixture
) -> None:
    url, _ = gateway
    ana = await login_as(url, "ana")
    try:
        code, message = await error_of(ana.memory.search(query="explode"))
        assert code == SERVER_ERROR and "InternalException" in message and "Duplicate keys" in message
        assert (await ana.health())["ok"] is True  # same connection, still served
        assert (await ana.memory.search(query="fine"))["results"]
        code, _ = await error_of(ana.memory.search(query="explode"))  # the slot was given back each time
        code, _ = await error_of(ana.memory.search(query="explode"))
        assert code == SERVER_ERROR
    finally:
        await ana.close()
    assert "memory.search failed" in caplog.text
    other = await login_as(url, "bo")  # new connections too
    try:
        assert (await other.memory.search(query="fine"))["results"]
    finally:
        await other.close()


def test_limits_are_settings_with_bounds() -> None:
    settings, problems = gateway_settings_from_dict(
        {"max_query_chars": 0, "max_memory_calls_per_user": "many"}, {}
    )
    assert settings.max_query_chars == 4096 and settings.max_memory_calls_per_user == 2
    assert len(problems) == 2 and all("using" in p for p in problems)
