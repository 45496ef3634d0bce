"""Document sync: editor buffers and watched-file events feed the indexer; typing never waits."""

from __future__ import annotations

from lsprotocol import types

from mnemo.lsp.server import MnemoLanguageServer


def _rel(ls: MnemoLanguageServer, uri: str) -> str | None:
    return ls.core.workspace.rel_from_uri(uri)


def _disk_text(ls: MnemoLanguageServer, rel: str) -> str | None:
    try:
        return (ls.core.workspace.root / rel).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None


def _changed(ls: MnemoLanguageServer, uri: str) -> None:
    for listener in ls.document_listeners:
        listener(uri)


def register(server: MnemoLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MnemoLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        rel = _rel(ls, params.text_document.uri)
        if rel is not None and params.text_document.text != _disk_text(ls, rel):
            ls.core.memory.schedule_buffer(rel, params.text_document.text)
        if rel is not None:
            _changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: MnemoLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        rel = _rel(ls, params.text_document.uri)
        if rel is not None:
            document = ls.workspace.get_text_document(params.text_document.uri)
            ls.core.memory.schedule_buffer(rel, document.source)
            _changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: MnemoLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        rel = _rel(ls, params.text_document.uri)
        if rel is not None:
            ls.core.memory.schedule_buffer(rel, None)
            _changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MnemoLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        rel = _rel(ls, params.text_document.uri)
        if rel is not None:
            ls.core.memory.schedule_buffer(rel, None)  # unsaved edits were discarded: the disk wins

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: MnemoLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            rel = _rel(ls, change.uri)
            if rel is not None:
                ls.core.memory.schedule_buffer(rel, None)
