"""End to end against the real server: indexing at start, search, get, edits, errors."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import wait_ready

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None


async def test_search_finds_template_note_with_parts(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    result = await keyword_client.protocol.send_request_async(
        "mnemo/memorySearch", {"query": "PostgreSQL billing", "maxResults": 3}
    )
    assert result.mode == "keyword"
    assert result.results, "expected at least one hit"
    top = result.results[0]
    assert top.citation == f"{top.path}#L{top.startLine}-L{top.endLine}"
    assert "PostgreSQL" in top.snippet
    assert 0 < top.parts.text <= 1
    assert len(result.results) <= 3


async def test_chinese_query_over_lsp(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    result = await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"query": "服务器部署"})
    assert any(r.path == "memory/2026-11-02.md" for r in result.results)


async def test_memory_get_and_refusals(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    got = await keyword_client.protocol.send_request_async(
        "mnemo/memoryGet", {"path": "MEMORY.md", "from": 1, "lines": 1}
    )
    assert got.text == "# Memory"
    assert got.lines == 1
    expected = {"../etc/passwd.md": "'..'", "/etc/passwd": "absolute", "mnemo.toml": "Markdown"}
    for bad, reason in expected.items():
        with pytest.raises(Exception) as info:
            await keyword_client.protocol.send_request_async("mnemo/memoryGet", {"path": bad})
        assert reason in str(info.value), str(info.value)


async def test_invalid_params_are_rejected(keyword_client: LanguageClient) -> None:
    with pytest.raises(Exception) as info:
        await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"maxResults": 3})
    assert "query" in str(info.value)


async def test_unsaved_edit_is_searchable_at_once(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    ws = keyword_client.ws  # type: ignore[attr-defined]
    path = ws / "memory" / "deploy-runbook.md"
    uri = path.as_uri()
    text = path.read_text(encoding="utf-8")
    keyword_client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)
        )
    )
    edited = text + "\n## Canary\nThe zebracorn canary gets five percent of traffic.\n"
    keyword_client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=edited)],
        )
    )
    # No sleep: the search must apply the pending edit itself rather than return stale results.
    result = await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"query": "zebracorn"})
    assert [r.path for r in result.results] == ["memory/deploy-runbook.md"]
    assert "zebracorn" in result.results[0].snippet
    assert path.read_text(encoding="utf-8") == text, "indexing must never write Markdown"
    # Closing without saving reverts to the disk contents.
    keyword_client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri))
    )
    await asyncio.sleep(0.3)
    result = await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"query": "zebracorn"})
    assert result.results == []


async def test_status_reports_counts(keyword_client: LanguageClient) -> None:
    status = await wait_ready(keyword_client)
    assert status.files >= 4
    assert status.chunks >= status.files
    assert status.mode == "keyword"
    reports = [r for token in keyword_client.progress_reports.values() for r in token]
    assert "loading the embedding model" not in [getattr(r, "message", None) for r in reports]


@pytest.mark.model
@pytest.mark.skipif(not HAS_LLAMA, reason="llama-cpp-python is not installed (run make install)")
async def test_hybrid_search_with_the_real_local_model(model_client: LanguageClient) -> None:
    status = await wait_ready(model_client, timeout=300)
    assert status.dims == 384
    result = await model_client.protocol.send_request_async(
        "mnemo/memorySearch", {"query": "which relational database backs our invoices?"}
    )
    assert result.mode == "hybrid"
    top = result.results[0]
    assert "PostgreSQL" in top.snippet, "a paraphrase with no shared keyword must be found by its meaning"
    assert top.parts.vector > 0.2
    # The server loads the model before the index syncs (its one-time peak while the process is small),
    # and says so in the indexing progress.
    (reports,) = model_client.progress_reports.values()
    messages = [getattr(r, "message", None) for r in reports]
    assert messages.index("loading the embedding model") < next(
        i for i, m in enumerate(messages) if m and "/" in m
    ), messages


async def test_bounds_answer_invalid_params_and_long_queries_are_cut(keyword_client: LanguageClient) -> None:
    await wait_ready(keyword_client)
    bad_gets = [{"lines": -3}, {"lines": 0}, {"from": 0}, {"from": 10**12}, {"from": 1, "lines": 10**12}]
    for extra in bad_gets:
        with pytest.raises(Exception) as info:
            await keyword_client.protocol.send_request_async(
                "mnemo/memoryGet", {"path": "MEMORY.md", **extra}
            )
        message = str(info.value)
        assert getattr(info.value, "code", None) == -32602, (type(info.value), message)  # InvalidParams
        assert "'lines'" in message or "'from'" in message, message
    for bad in (0, -1, 201):
        with pytest.raises(Exception) as info:
            await keyword_client.protocol.send_request_async(
                "mnemo/memorySearch", {"query": "PostgreSQL", "maxResults": bad}
            )
        assert "maxResults" in str(info.value)
    query = "PostgreSQL billing " + "x" * 119_000  # the report: a 119 KB query ran for 34 s
    started = asyncio.get_running_loop().time()
    result = await keyword_client.protocol.send_request_async("mnemo/memorySearch", {"query": query})
    assert asyncio.get_running_loop().time() - started < 15
    assert len(result.query) == 4096
    assert any("cut to its first 4096 of 119019 characters" in note for note in result.notes), result.notes
    assert result.results and result.results[0].path in ("MEMORY.md", "memory/2026-11-02.md")
