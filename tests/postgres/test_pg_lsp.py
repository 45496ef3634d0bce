"""``mnemo serve`` end to end with ``[index] backend = "postgres"``: the real server process indexes the
template workspace into the throwaway cluster and answers hybrid searches (vectors from a loopback
embeddings endpoint), in English, Chinese and with an unsaved edit, and records feedback on a chat turn
(a scripted loopback chat endpoint) in the namespace."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.fake_chat_endpoint import Endpoint, agent_toml, chat_endpoint
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


@pytest.fixture
def chat() -> Iterator[Endpoint]:
    with chat_endpoint(lambda messages: ("The billing service uses PostgreSQL.", "stop")) as ep:
        yield ep


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "mnemo", "serve"]))
async def team_chat_client(
    lsp_client: LanguageClient, tmp_path: Path, namespace: str, endpoint: str, chat: Endpoint
) -> AsyncIterator[LanguageClient]:
    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATE, ws)
    extra = (
        embedding_toml(endpoint) + "\n[server]\ndebounce_ms = 50\n" + agent_toml(chat.url, grounding="off")
    )
    (ws / "mnemo.toml").write_text(team_toml(namespace, extra), encoding="utf-8")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "neovim")
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_feedback_over_lsp_lands_in_the_namespace(
    team_chat_client: LanguageClient, namespace: str, pg_env: str
) -> None:
    """mnemo/chat then mnemo/feedback through the real server on the shared index: the tally is the
    namespace's (in PostgreSQL, where every teammate's process reads it) and the hover shows it."""
    ws: Path = team_chat_client.ws  # type: ignore[attr-defined]
    await wait_ready(team_chat_client)
    send = team_chat_client.protocol.send_request_async
    answer = await send("mnemo/chat", {"message": "Which database does the billing service use?"})
    up = await send("mnemo/feedback", {"sessionId": answer.sessionId, "useful": True})
    assert (up.turn, up.useful, up.signal) == (1, True, "explicit") and "MEMORY.md" in {
        c.path for c in up.chunks
    }
    with psycopg.connect(pg_env) as con:
        rows = con.execute(
            "SELECT DISTINCT path, useful FROM mnemo.feedback WHERE namespace = %s", [namespace]
        ).fetchall()
    assert ("MEMORY.md", True) in rows and all(useful for _, useful in rows)
    decision = "- The billing service uses PostgreSQL (decided 2026-11-02; replaces the earlier MySQL plan)."
    line = (ws / "MEMORY.md").read_text(encoding="utf-8").splitlines().index(decision)
    hover = await team_chat_client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier((ws / "MEMORY.md").as_uri()), types.Position(line, 2))
    )
    assert hover is not None and "useful 1 / not 0" in str(hover.contents.value)  # type: ignore[union-attr]
