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


def _opened(ls: MnemoLanguageServer, uri: str, text: str) -> None:
    rel = _rel(ls, uri)
    if rel is not None and text != _disk_text(ls, rel):
        ls.core.memory.schedule_buffer(rel, text)
    if rel is not None:
        _changed(ls, uri)


def _edited(ls: MnemoLanguageServer, uri: str) -> None:
    rel = _rel(ls, uri)
    if rel is not None:
        ls.core.memory.schedule_buffer(rel, ls.workspace.get_text_document(uri).source)
        _changed(ls, uri)


def _saved(ls: MnemoLanguageServer, uri: str) -> None:
    rel = _rel(ls, uri)
    if rel is not None:
        ls.core.memory.schedule_buffer(rel, None)
        _changed(ls, uri)


def _disk_wins(ls: MnemoLanguageServer, uris: list[str]) -> None:
    """Closed without saving, or changed on disk: the disk's text is what is indexed."""
    for uri in uris:
        rel = _rel(ls, uri)
        if rel is not None:
            ls.core.memory.schedule_buffer(rel, None)


def register(server: MnemoLanguageServer) -> None:
    # Before the services are up (right after `initialized`) the work waits for them, not the loop.
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MnemoLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        document = params.text_document
        ls.when_ready(lambda: _opened(ls, document.uri, document.text))

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: MnemoLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.when_ready(lambda: _edited(ls, uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: MnemoLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.when_ready(lambda: _saved(ls, uri))

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MnemoLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.when_ready(lambda: _disk_wins(ls, [uri]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: MnemoLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
        uris = [change.uri for change in params.changes]
        ls.when_ready(lambda: _disk_wins(ls, uris))
