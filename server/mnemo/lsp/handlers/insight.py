"""Hover and code lens on memory files: retrieval scores, decay and the last Git change of a line."""

from __future__ import annotations

import asyncio

from lsprotocol import types

from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer


def register(server: MnemoLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: MnemoLanguageServer, params: types.HoverParams) -> types.Hover | None:
        rel = ls.core.workspace.rel_from_uri(params.text_document.uri)
        if rel is None:
            return None
        found = await asyncio.to_thread(ls.core.editor.insight, rel, params.position.line + 1)
        if found is None:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=found.to_markdown()),
            range=types.Range(
                types.Position(params.position.line, 0), types.Position(params.position.line + 1, 0)
            ),
        )

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: MnemoLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        rel = ls.core.workspace.rel_from_uri(params.text_document.uri)
        if rel is None:
            return []
        lenses = await asyncio.to_thread(ls.core.editor.lenses, rel)
        return [
            types.CodeLens(
                range=types.Range(
                    types.Position(lens.start_line - 1, 0), types.Position(lens.start_line - 1, 0)
                ),
                command=types.Command(
                    title=lens.title,
                    command=protocol.CMD_HISTORY,
                    arguments=[{"path": rel, "line": lens.start_line}],
                ),
            )
            for lens in lenses
        ]
