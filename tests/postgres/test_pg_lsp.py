"""``mnemo serve`` end to end with ``[index] backend = "postgres"``: the real server process indexes the
template workspace into the throwaway cluster and answers hybrid searches (vectors from a loopback
embeddings endpoint), in English, Chinese and with an unsaved edit."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.lsp.conftest import TEMPLATE, start_client, wait_ready
from tests.postgres.conftest import team_toml
from tests.postgres.helpers import embedding_toml, hash_embeddings_endpoint


@pytest.fixture(autouse=True)
def _server_env(pg_env: str) -> str:
    """MNEMO_PG_DSN set before pytest-lsp starts the server process (it starts it before the fixture's
    own arguments are resolved; autouse fixtures come first)."""
    return pg_env


@pytest.fixture
def endpoint() -> Iterator[str]:
    with hash_embeddings_endpoint() as url:
        yield url


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "mnemo", "serve"]))
async def team_client(
    lsp_client: LanguageClient, tmp_path: Path, namespace: str, endpoint: str
) -> AsyncIterator[LanguageClient]:
    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATE, ws)
    toml = team_toml(namespace, embedding_toml(endpoint) + "\n[server]\ndebounce_ms = 50\n")
    (ws / "mnemo.toml").write_text(toml, encoding="utf-8")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


async def _search(client: LanguageClient, query: str) -> object:
    return await client.protocol.send_request_async("mnemo/memorySearch", {"query": query, "maxResults": 4})


async def test_hybrid_search_over_lsp_on_the_shared_index(
    team_client: LanguageClient, namespace: str
) -> None:
    status = await wait_ready(team_client)
    assert status.index == f"postgresql:{namespace}" and status.mode == "hybrid"
    assert status.chunks >= status.files >= 4 and status.vectors.embedded == status.chunks
    result = await _search(team_client, "PostgreSQL billing")
    assert result.mode == "hybrid" and "PostgreSQL" in result.results[0].snippet  # type: ignore[attr-defined]
    assert result.results[0].parts.vector is not None  # type: ignore[attr-defined]
    chinese = await _search(team_client, "服务器部署")
    assert any(r.path == "memory/2026-11-02.md" for r in chinese.results)  # type: ignore[attr-defined]

    path = team_client.ws / "memory" / "deploy-runbook.md"  # type: ignore[attr-defined]
    uri, text = path.as_uri(), path.read_text(encoding="utf-8")
    team_client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)
        )
    )
    team_client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [
                types.TextDocumentContentChangeWholeDocument(
                    text=text + "\n## Canary\nThe zebracorn 金丝雀 canary.\n"
                )
            ],
        )
    )
    edited = await _search(team_client, "zebracorn 金丝雀")
    assert [r.path for r in edited.results][:1] == ["memory/deploy-runbook.md"]  # type: ignore[attr-defined]
