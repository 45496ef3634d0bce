"""mnemo/feedback, mnemo/consolidate (and its command and code action) and memorySearch's onePerFile through
the real server, with VS Code's and Neovim's capabilities, and a scripted OpenAI-compatible chat endpoint
on loopback (issue 18, points 8 and 9)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from tests.fake_chat_endpoint import Endpoint, agent_toml, chat_endpoint
from tests.lsp.conftest import TEMPLATE, server_config, start_client, wait_ready

MERGED = "Coffee: dark roast, no sugar, oat milk."
EXTRA = {
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Coffee preference: dark roast, no sugar, oat milk.\n",
    "memory/billing.md": (
        "# Billing\n\n## Database\n\nThe billing service keeps invoices in PostgreSQL.\n\n"
        "## Backups\n\nThe billing PostgreSQL database is backed up nightly.\n"
    ),
}


def reply(messages: list[dict[str, Any]]) -> tuple[str, str]:
    if str(messages[0].get("content", "")).startswith("These lines are copies of one memory"):
        return MERGED, "stop"
    return "The billing service uses PostgreSQL.", "stop"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with chat_endpoint(reply) as ep:
        yield ep


@pytest_lsp.fixture(config=server_config(), params=["visual-studio-code", "neovim"])
async def client(
    lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: Path, endpoint: Endpoint
) -> AsyncIterator[LanguageClient]:
    ws = tmp_path / "ws"
    shutil.copytree(TEMPLATE, ws)
    for rel, text in EXTRA.items():
        (ws / rel).write_text(text, encoding="utf-8")
    (ws / "mnemo.toml").write_text(
        '[embedding]\nprovider = "none"\n\n[server]\ndebounce_ms = 50\n'
        + agent_toml(endpoint.url, grounding="off"),
        encoding="utf-8",
    )
    lsp_client.ws = ws  # type: ignore[attr-defined]
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, request.param)
    yield lsp_client
    await lsp_client.shutdown_session()


async def _hover(client: LanguageClient, ws: Path, rel: str, needle: str) -> str:
    line = (ws / rel).read_text(encoding="utf-8").splitlines().index(needle)
    found = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier((ws / rel).as_uri()), types.Position(line, 2))
    )
    assert found is not None
    return str(found.contents.value)  # type: ignore[union-attr]


async def test_feedback_is_recorded_shown_and_harvested(client: LanguageClient) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    send = client.protocol.send_request_async
    chat = await send("mnemo/chat", {"message": "Which database does the billing service use?"})
    sid = chat.sessionId
    up = await send("mnemo/feedback", {"sessionId": sid, "useful": True})
    assert (up.turn, up.useful, up.signal) == (1, True, "explicit")
    assert "MEMORY.md" in {c.path for c in up.chunks}
    down = await send("mnemo/feedback", {"sessionId": sid, "turn": 1, "useful": False})
    assert down.useful is False and down.turn == 1
    decision = "- The billing service uses PostgreSQL (decided 2026-11-02; replaces the earlier MySQL plan)."
    assert "useful 0 / not 1" in await _hover(client, ws, "MEMORY.md", decision)
    # The next message corrects the answer: the server reads it from the transcript after the turn.
    await send("mnemo/chat", {"message": "No, that's wrong.", "sessionId": sid})
    for _ in range(100):
        if "useful 0 / not 2" in await _hover(client, ws, "MEMORY.md", decision):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the correction was not recorded")
    for bad in (
        {"sessionId": "no-such-session", "useful": True},
        {"sessionId": sid, "turn": 0, "useful": True},
        {"sessionId": sid, "turn": 9, "useful": True},
        {"sessionId": sid},
        {"sessionId": sid, "useful": "yes"},
    ):
        with pytest.raises(JsonRpcInvalidParams):
            await send("mnemo/feedback", bad)


async def test_one_per_file(client: LanguageClient) -> None:
    await wait_ready(client)
    send = client.protocol.send_request_async
    query = {"query": "billing PostgreSQL database", "maxResults": 6}
    every = [r.path for r in (await send("mnemo/memorySearch", query)).results]
    assert every.count("memory/billing.md") == 2
    one = [r.path for r in (await send("mnemo/memorySearch", {**query, "onePerFile": True})).results]
    assert len(one) == len(set(one)) and "memory/billing.md" in one
    again = [r.path for r in (await send("mnemo/memorySearch", {**query, "onePerFile": False})).results]
    assert again == every
    with pytest.raises(JsonRpcInvalidParams):
        await send("mnemo/memorySearch", {**query, "onePerFile": "yes"})


async def test_consolidate_proposes_an_edit_to_review(client: LanguageClient, endpoint: Endpoint) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    profile: str = client.profile  # type: ignore[attr-defined]
    await wait_ready(client)
    send = client.protocol.send_request_async
    before = {p: p.read_text(encoding="utf-8") for p in ws.rglob("*.md")}
    newest = await send("mnemo/consolidate", {"useModel": False})
    assert [(c.keep, c.how) for c in newest.clusters] == [("MEMORY.md#L13", "newest")]
    assert sorted(line.citation for line in newest.clusters[0].lines) == [
        "MEMORY.md#L13",
        "memory/2026-11-20.md#L3",
    ]
    assert "--- a/memory/2026-11-20.md" in newest.diff
    edit = newest.edit
    if profile == "visual-studio-code":  # documentChanges, annotated for confirmation
        assert [a.needsConfirmation for a in edit.changeAnnotations] == [True]
        assert all(e.annotationId == "mnemo.consolidate" for d in edit.documentChanges for e in d.edits)
    else:  # a client without documentChanges gets plain changes
        assert getattr(edit, "documentChanges", None) is None and len(edit.changes) >= 1
    merged = await send("mnemo/consolidate", {"useModel": True})
    assert [c.how for c in merged.clusters] == ["model"]
    assert merged.clusters[0].text == f"- {MERGED}" and "scripted" in merged.model
    assert any("These lines are copies" in str(r) for r in endpoint.requests)
    default = await send("mnemo/consolidate", {})
    assert [c.how for c in default.clusters] == ["model"]
    with pytest.raises(JsonRpcInvalidParams):
        await send("mnemo/consolidate", {"useModel": "yes"})
    # The command sends the same edit with workspace/applyEdit; the server itself writes nothing.
    asked: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        asked.append(params)
        return types.ApplyWorkspaceEditResult(applied=False, failure_reason="the user declined")

    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams("mnemo.consolidate", [{"useModel": False}])
    )
    assert result == {"clusters": 1, "applied": False}
    assert len(asked) == 1 and asked[0].label == "mnemo: consolidate memories"
    if profile == "visual-studio-code":
        assert asked[0].edit.change_annotations["mnemo.consolidate"].needs_confirmation is True
    assert {p: p.read_text(encoding="utf-8") for p in ws.rglob("*.md")} == before


async def test_a_code_action_on_a_duplicated_line(client: LanguageClient) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    rel = "memory/2026-11-20.md"
    uri = (ws / rel).as_uri()
    text = (ws / rel).read_text(encoding="utf-8")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "markdown", 1, text))
    )
    line = text.splitlines().index("- Coffee preference: dark roast, no sugar, oat milk.")
    found = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(line, 0), types.Position(line, 0)),
            types.CodeActionContext(diagnostics=[]),
        )
    )
    assert found is not None
    actions = [a for a in found if isinstance(a, types.CodeAction)]
    rewrite = [a for a in actions if a.kind == "refactor.rewrite.mnemo.consolidate"]
    assert len(rewrite) == 1 and rewrite[0].edit is not None
    assert "Consolidate near-duplicates: keep" in rewrite[0].title
    # (a CodeAction with only a command reads back as a Command on the client side)
    source = [a for a in found if a.title.startswith("Consolidate near-duplicate memories across files")]
    assert len(source) == 1 and "mnemo.consolidate" in str(source[0].command)
    other = text.splitlines().index("# 2026-11-20")
    found = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(other, 0), types.Position(other, 0)),
            types.CodeActionContext(diagnostics=[]),
        )
    )
    assert not [
        a
        for a in found or []
        if isinstance(a, types.CodeAction) and a.kind == "refactor.rewrite.mnemo.consolidate"
    ]
