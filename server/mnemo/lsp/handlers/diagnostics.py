"""Hygiene diagnostics (secrets, injection budget, near-duplicates, broken links) pushed to the editor.

Published for a document after it is opened, changed (debounced) or saved, and for every memory file
after each background index sync. The core computes; this module only converts and schedules.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from lsprotocol import types

from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer

if TYPE_CHECKING:
    from mnemo.editor.hygiene import Problem

log = logging.getLogger(__name__)

SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def to_diagnostic(ls: MnemoLanguageServer, problem: Problem) -> types.Diagnostic:
    uri = ls.core.workspace.uri
    return types.Diagnostic(
        range=types.Range(types.Position(*problem.start), types.Position(*problem.end)),
        message=problem.message,
        severity=SEVERITY[problem.severity],
        code=problem.code,
        source=protocol.DIAGNOSTIC_SOURCE,
        related_information=[
            types.DiagnosticRelatedInformation(
                types.Location(
                    uri(r.path),
                    types.Range(types.Position(r.start_line - 1, 0), types.Position(r.end_line, 0)),
                ),
                r.message,
            )
            for r in problem.related
        ]
        or None,
        data={"kind": problem.kind, **problem.data},
    )


def open_buffers(ls: MnemoLanguageServer) -> dict[str, str]:
    out = {}
    for uri, document in list(ls.workspace.text_documents.items()):
        rel = ls.core.workspace.rel_from_uri(uri)
        if rel is not None:
            out[rel] = document.source
    return out


class OnePassAtATime:
    """Runs a workspace pass so that passes never overlap: asked while one runs, it runs once more after
    it (what changed meanwhile is seen), however often it was asked. On the event loop only.

    The index listeners fire after the sync and again when the background vectors are ready, so a
    server's start asked for two or three passes at once: each held every memory chunk's vector (a
    372 MB peak at 2,000 notes against 276 for one pass; docs/benchmarks.md)."""

    def __init__(self, work: Callable[[], Awaitable[None]]) -> None:
        self.work = work
        self.running = False
        self.again = False

    async def __call__(self) -> None:
        if self.running:
            self.again = True
            return
        self.running = True
        try:
            self.again = True
            while self.again:
                self.again = False
                await self.work()
        finally:
            self.running = False


def register(server: MnemoLanguageServer) -> None:
    timers: dict[str, asyncio.TimerHandle] = {}
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        task.add_done_callback(_log_failure)

    async def publish(uri: str) -> None:
        rel = server.core.workspace.rel_from_uri(uri)
        if rel is None:
            return
        document = server.workspace.get_text_document(uri)
        text, version = document.source, document.version
        problems = await asyncio.to_thread(server.core.editor.diagnose_buffer, rel, text)
        if server.workspace.get_text_document(uri).version != version:
            return  # edited (or closed) meanwhile: the newer text's own publish is on its way
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri, [to_diagnostic(server, p) for p in problems], version)
        )

    async def publish_all() -> None:
        found = await asyncio.to_thread(server.core.editor.diagnose_workspace, open_buffers(server))
        open_docs = {
            server.core.workspace.rel_from_uri(uri): uri for uri in list(server.workspace.text_documents)
        }
        for rel, problems in found.items():
            if rel in open_docs:
                # An open document's diagnostics follow its buffer: a workspace pass computed from an
                # older index must not overwrite them, so it is re-published on its own path.
                schedule(open_docs[rel])
                continue
            server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(
                    server.core.workspace.uri(rel), [to_diagnostic(server, p) for p in problems]
                )
            )

    def schedule(uri: str) -> None:
        old = timers.pop(uri, None)
        if old is not None:
            old.cancel()
        delay = server.core.settings.server.debounce_ms / 1000
        loop = asyncio.get_running_loop()
        timers[uri] = loop.call_later(delay, lambda: spawn(publish(uri)))

    server.document_listeners.append(schedule)
    workspace_pass = OnePassAtATime(publish_all)
    server.index_listeners.append(lambda: spawn(workspace_pass()))


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("memory diagnostics failed: %s", task.exception(), exc_info=task.exception())
