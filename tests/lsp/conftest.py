"""pytest-lsp fixtures: the real server over stdio, once with VS Code's and once with Neovim's capabilities."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.fake_chat_endpoint import agent_toml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "workspace-template"


def make_workspace(tmp: Path, provider: str) -> Path:
    ws = tmp / "ws"
    shutil.copytree(TEMPLATE, ws)
    (ws / "mnemo.toml").write_text(
        f'[embedding]\nprovider = "{provider}"\n\n[server]\ndebounce_ms = 50\n', encoding="utf-8"
    )
    return ws


async def start_client(client: LanguageClient, ws: Path, profile: str) -> None:
    params = types.InitializeParams(
        capabilities=client_capabilities(profile),
        root_uri=ws.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
    )
    client.initialized_with = await client.initialize_session(params)  # type: ignore[attr-defined]


async def start_with_agent(client: LanguageClient, tmp: Path, url: str, **agent: Any) -> Path:
    """A keyword-only workspace whose ``[agent]`` talks to the endpoint at ``url``, opened by VS Code."""
    ws = make_workspace(tmp, "none")
    with (ws / "mnemo.toml").open("a", encoding="utf-8") as f:
        f.write(agent_toml(url, **agent))
    await start_client(client, ws, "visual-studio-code")
    return ws


async def wait_ready(client: LanguageClient, timeout: float = 120) -> dict:
    import asyncio

    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status = await client.protocol.send_request_async("mnemo/status", {})
        vectors = getattr(status, "vectors", None)  # keyword side first, vectors in the background
        if status.state == "ready" and (vectors is None or vectors.embedded == vectors.chunks):
            return status
        assert status.state != "error", status.message
        assert asyncio.get_running_loop().time() < deadline, f"index not ready: {status}"
        await asyncio.sleep(0.1)


def server_config() -> ClientServerConfig:
    return ClientServerConfig(server_command=[sys.executable, "-m", "mnemo", "serve"])


@pytest_lsp.fixture(
    config=server_config(),
    params=["visual-studio-code", "neovim"],
)
async def keyword_client(
    lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, request.param)
    yield lsp_client
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=server_config())
async def model_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "local")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()
