"""Right after ``initialized``, before the services are open: requests get an answer at once (the
event loop never waits for the services), and document notifications are applied once they are up.

The real server runs with ``build_services`` held until the test writes a file into the workspace, so
"not ready yet" is certain, not a race with a fast start-up.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from .conftest import make_workspace, start_client, wait_ready
from .test_editor_features import SECRET, wait_diagnostics

RELEASE = "release-services"
HELD_SERVER = f"""
import pathlib, sys, time
import mnemo.services as services
real = services.build_services
def held(root, *args, **kwargs):
    gate = pathlib.Path(root) / {RELEASE!r}
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return real(root, *args, **kwargs)
services.build_services = held
sys.argv = ["mnemo", "serve"]
from mnemo.cli.main import main
raise SystemExit(main())
"""
ANSWER_S = 10.0
"""Far below the 60 s a request used to wait on the event loop; an answer comes in milliseconds."""


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-c", HELD_SERVER]))
async def held_client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    (ws / RELEASE).touch()
    await lsp_client.shutdown_session()


async def test_requests_answered_while_starting(held_client: LanguageClient) -> None:
    ws: Path = held_client.ws  # type: ignore[attr-defined]
    uri = (ws / "MEMORY.md").as_uri()
    get = asyncio.ensure_future(
        held_client.protocol.send_request_async("mnemo/memoryGet", {"path": "MEMORY.md"})
    )
    hover = held_client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(0, 0))
    )
    with pytest.raises(JsonRpcException) as caught:  # a standard request: answered at once
        await asyncio.wait_for(hover, ANSWER_S)
    assert caught.value.code == types.LSPErrorCodes.ContentModified
    assert "still starting" in caught.value.message
    assert not (ws / RELEASE).exists()  # answered while the services were still held
    assert not get.done()  # mnemo's own request waits for the services, off the event loop...
    (ws / RELEASE).touch()
    got = await asyncio.wait_for(get, 60)  # ...and is answered once they are up
    assert got.path == "MEMORY.md" and got.text.startswith("# ")


async def test_document_opened_while_starting_is_applied(held_client: LanguageClient) -> None:
    ws: Path = held_client.ws  # type: ignore[attr-defined]
    path = ws / "memory" / "tokens.md"
    path.write_text("# Tokens\n", encoding="utf-8")
    unsaved = f"# Tokens\n\n- ci token: {SECRET}\n"
    uri = path.as_uri()
    held_client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "markdown", 1, unsaved))
    )
    # the loop is free while the services are held: a request sent after the notification is answered
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(
            held_client.text_document_hover_async(
                types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(0, 0))
            ),
            ANSWER_S,
        )
    (ws / RELEASE).touch()
    await wait_ready(held_client)
    found = await wait_diagnostics(held_client, uri, lambda ds: any(d.code == "github-pat" for d in ds))
    assert [d.range.start.line for d in found if d.code == "github-pat"] == [2]
