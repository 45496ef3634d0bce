"""A real gateway on a loopback port, with a real agent and memory and a scripted model."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonrpc_websocket import Server

from mnemo.agent import Agent
from mnemo.agent.providers import ChatMessage, ScriptedProvider
from mnemo.gateway.auth import client_proof
from mnemo.gateway.server import Gateway
from mnemo.gateway.settings import gateway_settings_from_dict

TOKEN = "test-admin-token-0123456789"
PASSWORD = "correct horse battery staple"
WEBHOOK_SECRET = "webhook-secret-abcdef"


def echo(messages: Sequence[ChatMessage]) -> str:
    return "echo: " + messages[-1].content


@dataclass
class Running:
    gateway: Gateway
    url: str
    base: str
    provider: ScriptedProvider
    root: Path


async def connect(url: str) -> Server:
    server = Server(url)
    await server.ws_connect()
    return server


async def login(url: str, method: str = "token", secret: str = TOKEN, role: str | None = None) -> Server:
    server = await connect(url)
    challenge = await server.auth.challenge()
    proof = client_proof(method, secret, challenge["nonce"], challenge["salt"], challenge["iterations"])
    params: dict[str, Any] = {"method": method, "proof": proof}
    if role:
        params["role"] = role
    await server.auth.login(**params)
    return server


@pytest.fixture
async def start_gateway(
    sample_workspace: Path, services_factory: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Any]]:
    """``await start_gateway(raw_settings, reply=echo)`` -> Running; stopped at the end of the test."""
    monkeypatch.setenv("MNEMO_WEBHOOK_SECRET", WEBHOOK_SECRET)
    started: list[Gateway] = []

    async def start(
        raw: dict[str, Any] | None = None, reply: Any = echo, root: Path | None = None, approvals: Any = None
    ) -> Running:
        ws_root = root or sample_workspace
        services = services_factory(ws_root)
        services.memory.sync()
        provider = ScriptedProvider(default=reply)
        agent = Agent(ws_root, services.memory, provider, services.settings.agent)
        settings, problems = gateway_settings_from_dict(
            raw or {}, {"MNEMO_GATEWAY_TOKEN": TOKEN, "MNEMO_GATEWAY_PASSWORD": PASSWORD}
        )
        assert problems == []
        settings.auth.pbkdf2_iterations = 1000  # fast tests; the default is 100,000
        gateway = Gateway(
            ws_root, settings, agent, services.memory, ws_root / ".mnemo" / "gateway-sessions.json", approvals
        )
        port = await gateway.start("127.0.0.1", 0)
        started.append(gateway)
        return Running(gateway, f"ws://127.0.0.1:{port}/rpc", f"http://127.0.0.1:{port}", provider, ws_root)

    yield start
    for gateway in started:
        with contextlib.suppress(Exception):
            await gateway.stop()
