"""Code actions on memory files: redact a secret, promote a note into MEMORY.md, merge a duplicate, commit."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from mnemo.lsp import protocol
from mnemo.lsp.handlers import chat, consolidate
from mnemo.lsp.handlers.diagnostics import open_buffers
from mnemo.lsp.server import MnemoLanguageServer

if TYPE_CHECKING:  # the secrets rules load on the first code action, not before `initialize`
    from mnemo.editor import memory_edits

PROMOTE_KIND = "refactor.move.mnemo.promote"


def to_workspace_edit(ls: MnemoLanguageServer, edits: Sequence[memory_edits.TextEdit]) -> types.WorkspaceEdit:
    changes: dict[str, list[types.TextEdit]] = {}
    for e in edits:
        changes.setdefault(ls.core.workspace.uri(e.path), []).append(
            types.TextEdit(types.Range(types.Position(*e.start), types.Position(*e.end)), e.new_text)
        )
    return types.WorkspaceEdit(changes=changes)


def _last_line(r: types.Range) -> int:
    """A selection ending at column 0 of a later line covers the lines before it only."""
    return r.end.line - 1 if r.end.character == 0 and r.end.line > r.start.line else r.end.line


_DUPLICATE_LINES = ("startLine", "endLine", "otherStartLine", "otherEndLine")


def _duplicate_data(d: types.Diagnostic) -> dict[str, Any] | None:
    """A near-duplicate diagnostic's data, as the server sent it; None for any other diagnostic and for
    one whose data was changed on its way back (it is skipped: the other actions are still offered)."""
    data = protocol.to_plain(d.data)
    if (
        d.source == protocol.DIAGNOSTIC_SOURCE
        and isinstance(data, dict)
        and data.get("kind") == "near-duplicate"
        and isinstance(data.get("otherPath"), str)
        and all(type(data.get(key)) is int for key in _DUPLICATE_LINES)
    ):
        return data
    return None


def code_actions(ls: MnemoLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    from mnemo.editor import memory_edits

    rel = ls.core.workspace.rel_from_uri(params.text_document.uri)
    editor = ls.core.editor
    if rel is None or not editor.is_memory_markdown(rel):
        return []
    text = ls.workspace.get_text_document(params.text_document.uri).source
    first, last = params.range.start.line, _last_line(params.range)
    actions: list[types.CodeAction] = []
    redactions = memory_edits.redact_edits(rel, text, first, last)
    if redactions:
        rules = ", ".join(sorted({e.new_text for e in redactions}))
        actions.append(
            types.CodeAction(
                title=f"Redact secret ({rules})",
                kind=types.CodeActionKind.QuickFix,
                edit=to_workspace_edit(ls, redactions),
                is_preferred=True,
            )
        )
    for d in params.context.diagnostics:
        data = _duplicate_data(d)
        if data is None:
            continue
        edit = memory_edits.duplicate_removal_edit(rel, text, int(data["startLine"]), int(data["endLine"]))
        if edit is None:
            continue
        where = f"{data['otherPath']}#L{data['otherStartLine']}-L{data['otherEndLine']}"
        actions.append(
            types.CodeAction(
                title=f"Merge near-duplicate: keep {where}, remove this copy",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[d],
                edit=to_workspace_edit(ls, [edit]),
            )
        )
    buffers = open_buffers(ls)
    for section in editor.promotion_targets(rel, buffers):
        if not "".join(memory_edits.selected_lines(text, first, last)).strip():
            break
        edit = editor.promote(text, first, last, section, buffers)
        actions.append(
            types.CodeAction(
                title=f"Promote to {edit.path} › {section}" if section else f"Promote to {edit.path}",
                kind=PROMOTE_KIND,
                edit=to_workspace_edit(ls, [edit]),
            )
        )
    if first == last:  # a memory line with near-duplicates in other files
        found = consolidate.line_action(ls, rel, first, buffers)
        if found is not None:
            actions.append(found)
    actions.append(
        types.CodeAction(
            title="Consolidate near-duplicate memories across files…",
            kind=types.CodeActionKind.Source,
            command=types.Command(
                title="Consolidate memories", command=protocol.CMD_CONSOLIDATE, arguments=[{}]
            ),
        )
    )
    actions.append(
        types.CodeAction(
            title="Commit memory changes",
            kind=types.CodeActionKind.Source,
            command=types.Command(title="Commit memory changes", command=protocol.CMD_COMMIT, arguments=[{}]),
        )
    )
    return actions


def register(server: MnemoLanguageServer) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                PROMOTE_KIND,
                consolidate.KIND,
                types.CodeActionKind.Source,
            ]
        ),
    )
    async def code_action(ls: MnemoLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        found = await asyncio.to_thread(code_actions, ls, params)
        return found + chat.session_code_actions(ls, params.text_document.uri)
