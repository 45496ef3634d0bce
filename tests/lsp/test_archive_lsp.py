"""The session archive through the real server: its daily run after the first index sync, ``mnemo/archive``
and ``mnemo/markSession`` (consent for a conversation marked private), the archive as a search source."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from tests.lsp.conftest import make_workspace, server_config, start_client, wait_ready

OPEN = "2026-01-01-000000-aaaaaa"
SECRET = "2026-01-02-000000-bbbbbb"


def last_month() -> str:
    return (date.today().replace(day=1) - timedelta(days=1)).strftime("%Y-%m")


def transcript(ws: Path, session_id: str, texts: list[str], **flags: bool) -> None:
    month = last_month()
    events: list[dict[str, Any]] = [
        {"type": "session", "text": "", "ts": f"{month}-03T08:00:00Z", "seq": 0, "kind": "private"}
    ]
    for i, text in enumerate(texts, start=1):
        events.append({"type": "user", "text": text, "ts": f"{month}-03T08:{i:02d}:00Z", "seq": i})
    if flags:
        events.append({"type": "flags", "text": "", "ts": f"{month}-03T09:00:00Z", "seq": 99, **flags})
    (ws / "sessions").mkdir(exist_ok=True)
    (ws / "sessions" / f"{session_id}.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events), encoding="utf-8"
    )


def plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient, tmp_path: Path) -> AsyncIterator[LanguageClient]:
    ws = make_workspace(tmp_path, "none")
    transcript(ws, OPEN, ["where do the spare bicycle keys live?", "the bicycle keys hang by the door"])
    transcript(ws, SECRET, ["the surprise party for Dana is on the roof"], private=True)
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_client(lsp_client, ws, "visual-studio-code")
    yield lsp_client
    await lsp_client.shutdown_session()


async def request(client: LanguageClient, method: str, params: dict[str, Any]) -> Any:
    return plain(await client.protocol.send_request_async(method, params))


async def test_the_server_archives_daily_and_on_request_with_consent(client: LanguageClient) -> None:
    ws: Path = client.ws  # type: ignore[attr-defined]
    await wait_ready(client)
    archive = ws / "sessions" / "private-editor" / f"{last_month()}.md"
    for _ in range(600):  # the daily run follows the first index sync, on a worker thread
        if archive.exists():
            break
        await asyncio.sleep(0.1)
    text = archive.read_text(encoding="utf-8")
    assert "user: where do the spare bicycle keys live?" in text and "surprise party" not in text

    found: list[Any] = []
    for _ in range(600):  # the writer re-indexes what the run wrote
        found = (
            await request(client, "mnemo/memorySearch", {"query": "bicycle keys", "sources": ["archive"]})
        )["results"]
        if found:
            break
        await asyncio.sleep(0.1)
    assert [hit["path"] for hit in found][:1] == [f"sessions/private-editor/{last_month()}.md"]

    again = await request(client, "mnemo/archive", {"dryRun": True})
    assert again["months"] == [] and again["skipped"][0]["sessionId"] == SECRET  # marked private
    with pytest.raises(JsonRpcInvalidParams):
        await client.protocol.send_request_async("mnemo/archive", {"month": date.today().strftime("%Y-%m")})
    with pytest.raises(JsonRpcInvalidParams):
        await client.protocol.send_request_async("mnemo/markSession", {"sessionId": SECRET})

    marks = await request(client, "mnemo/markSession", {"sessionId": SECRET, "archiveConsent": True})
    assert marks == {"sessionId": SECRET, "private": True, "archiveConsent": True}
    rebuilt = await request(client, "mnemo/archive", {"month": last_month()})
    assert [m["path"] for m in rebuilt["months"]] == [f"sessions/private-editor/{last_month()}.md"]
    assert "user: the surprise party for Dana is on the roof" in archive.read_text(encoding="utf-8")
