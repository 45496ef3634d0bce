"""mnemo/consolidate and the mnemo.consolidate command: near-duplicate memories across files, one line each,
as a WorkspaceEdit the user reviews (never written by the server).

The edit's changes carry a change annotation with ``needsConfirmation`` when the client supports them (VS
Code then shows its refactor preview before anything changes); ``mnemo.consolidate`` sends it with
``workspace/applyEdit``. :func:`line_action` is the code action on a line that has near-duplicates.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from lsprotocol.converters import get_converter

from mnemo import wire
from mnemo.errors import MnemoError
from mnemo.lsp import protocol
from mnemo.lsp.handlers.diagnostics import open_buffers
from mnemo.lsp.server import MnemoLanguageServer

if TYPE_CHECKING:  # the editor core loads with the first request, not before `initialize`
    from mnemo.editor.consolidator import Proposal

ANNOTATION = "mnemo.consolidate"
KIND = "refactor.rewrite.mnemo.consolidate"


def _supports(ls: MnemoLanguageServer) -> tuple[bool, bool]:
    """(documentChanges, change annotations) in the client's workspace edit capabilities."""
    workspace = ls.client_capabilities.workspace
    edit = workspace.workspace_edit if workspace is not None else None
    if edit is None:
        return False, False
    return bool(edit.document_changes), edit.change_annotation_support is not None


def workspace_edit(ls: MnemoLanguageServer, proposal: Proposal) -> types.WorkspaceEdit:
    """The proposal as a WorkspaceEdit: annotated for confirmation when the client can show that,
    versioned for open documents, plain ``changes`` for a client without documentChanges."""
    by_path: dict[str, list[Any]] = {}
    document_changes, annotations = _supports(ls)
    for e in proposal.edits():
        where = types.Range(types.Position(*e.start), types.Position(*e.end))
        edit: types.TextEdit | types.AnnotatedTextEdit = (
            types.AnnotatedTextEdit(range=where, new_text=e.new_text, annotation_id=ANNOTATION)
            if annotations
            else types.TextEdit(range=where, new_text=e.new_text)
        )
        by_path.setdefault(e.path, []).append(edit)
    if not document_changes:
        return types.WorkspaceEdit(changes={ls.core.workspace.uri(p): v for p, v in by_path.items()})
    docs = []
    for path, edits in by_path.items():
        uri = ls.core.workspace.uri(path)
        opened = ls.workspace.text_documents.get(uri)
        version = opened.version if opened is not None else None
        docs.append(
            types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(uri, version), edits)
        )
    label = f"Consolidate {len(proposal.merges)} near-duplicate memor{'y' if len(proposal.merges) == 1 else 'ies'}"
    notes = {
        ANNOTATION: types.ChangeAnnotation(label, needs_confirmation=True, description=_description(proposal))
    }
    return types.WorkspaceEdit(document_changes=docs, change_annotations=notes if annotations else None)


def _description(proposal: Proposal) -> str:
    how = f"merged by {proposal.model}" if proposal.model else "the newest copy kept"
    return f"one line per cluster ({how}); the other copies are removed"


async def _propose(ls: MnemoLanguageServer, use_model: bool) -> Proposal:
    """The proposal, on a worker thread (core errors: RequestFailed)."""

    def propose() -> Proposal:
        return ls.core.consolidator(use_model=use_model).propose(open_buffers(ls))

    try:
        return await asyncio.to_thread(propose)
    except (MnemoError, OSError) as exc:
        raise protocol.RequestFailed(str(exc)) from exc


def line_action(
    ls: MnemoLanguageServer, rel: str, line: int, buffers: dict[str, str]
) -> types.CodeAction | None:
    """ "Consolidate …" on a memory line (0-based ``line``) that has near-duplicates in other files
    (``buffers``: :func:`~mnemo.lsp.handlers.diagnostics.open_buffers`)."""
    proposal = ls.core.consolidator(use_model=False).for_line(rel, line + 1, buffers)
    if proposal is None:
        return None
    merge = proposal.merges[0]
    others = ", ".join(m.citation for m in merge.removed)
    return types.CodeAction(
        title=f"Consolidate near-duplicates: keep {merge.keep.citation}, remove {others}",
        kind=KIND,
        edit=workspace_edit(ls, proposal),
    )


def register(server: MnemoLanguageServer) -> None:
    @server.feature(protocol.CONSOLIDATE)
    async def consolidate(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        p = protocol.ConsolidateParams.parse(params)
        proposal = await _propose(ls, p.use_model)
        edit = get_converter().unstructure(workspace_edit(ls, proposal), types.WorkspaceEdit)
        return {**wire.consolidation(proposal), "edit": edit}

    @server.command(protocol.CMD_CONSOLIDATE)
    async def consolidate_command(ls: MnemoLanguageServer, *args: Any) -> dict[str, Any]:
        p = protocol.ConsolidateParams.parse(args[0] if args else {})
        proposal = await _propose(ls, p.use_model)
        if not proposal.merges:
            ls.window_show_message(
                types.ShowMessageParams(
                    types.MessageType.Info, "mnemo: no near-duplicate memories across files"
                )
            )
            return {"clusters": 0, "applied": False}
        answer = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(workspace_edit(ls, proposal), label="mnemo: consolidate memories")
        )
        return {"clusters": len(proposal.merges), "applied": bool(answer.applied)}
