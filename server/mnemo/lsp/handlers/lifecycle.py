"""initialize / initialized / shutdown, background indexing with work-done progress, status, commands."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types

from mnemo import wire
from mnemo.lsp import protocol
from mnemo.lsp.server import MnemoLanguageServer

log = logging.getLogger(__name__)


def _root_from(params: types.InitializeParams, server: MnemoLanguageServer) -> Path:
    if server.requested_workspace is not None:
        return server.requested_workspace
    options = params.initialization_options
    if isinstance(options, dict) and isinstance(options.get("workspace"), str):
        return Path(options["workspace"]).expanduser()
    uri = None
    if params.workspace_folders:
        uri = params.workspace_folders[0].uri
    elif params.root_uri:
        uri = params.root_uri
    if uri:
        return Path(unquote(urlparse(uri).path))
    if params.root_path:
        return Path(params.root_path)
    return Path.cwd()


STATUS_EVERY_S = 0.25
"""Progress and ``mnemo/indexStatus`` during a sync at most this often (each file reports; a status
reads the index's counts on the event loop), and always at the end."""


LOADING_MODEL = "loading the embedding model"
"""Work-done progress while :func:`mnemo.embeddings.prepare` loads it, before the index syncs."""


class Throttle:
    """True at most once per ``seconds`` (and always for the final call)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last = -seconds

    def due(self, *, final: bool = False) -> bool:
        now = time.monotonic()
        if not final and now - self.last < self.seconds:
            return False
        self.last = now
        return True


def _supports_progress(server: MnemoLanguageServer) -> bool:
    """``window.workDoneProgress`` in the client's capabilities (LSP: no create request without it)."""
    window = server.client_capabilities.window
    return bool(window and window.work_done_progress)


async def index_in_background(
    server: MnemoLanguageServer, *, full: bool = False, prepare_model: bool = False
) -> None:
    """Sync the index on a worker thread, reporting work-done progress; typing never waits on it.

    ``prepare_model``: load the embedding model first (the server's start, when it writes the index:
    :func:`mnemo.embeddings.prepare`). The keyword side is committed first (searchable in seconds;
    status is sent and the listeners run then); the same progress then follows the background embedding
    of the pending chunks ("embedding 1,240/4,100 chunks") until it is done or cancelled (shutdown,
    client gone, re-index)."""
    memory = server.core.memory
    token = f"mnemo-index-{uuid.uuid4()}"
    progress = server.work_done_progress
    has_progress = _supports_progress(server)  # else the create request would wait for an answer forever
    try:
        if has_progress:
            await progress.create_async(token)
    except Exception:  # the client does not support server-initiated progress
        has_progress = False
    if has_progress:
        progress.begin(
            token, types.WorkDoneProgressBegin(title="mnemo: indexing memory", percentage=0, cancellable=True)
        )

    every = Throttle(STATUS_EVERY_S)

    def send_status() -> None:
        server.send_index_status(wire.index_status(memory.status()))

    def report(done: int, total: int, current: str) -> None:
        if not every.due(final=done >= total):  # called once a file: progress and status a few times a second
            return
        if has_progress:
            pct = int(100 * done / total) if total else 100
            server.post(
                lambda: progress.report(
                    token, types.WorkDoneProgressReport(message=f"{done}/{total} {current}", percentage=pct)
                )
            )
        server.post(send_status)

    server.index_cancel.clear()
    cancel_future = progress.tokens.get(token)
    if cancel_future is not None:
        cancel_future.add_done_callback(lambda _f: server.index_cancel.set())

    def embedding(embedded: int, total: int) -> None:
        if not every.due(final=embedded >= total):
            return
        if has_progress and total:
            text = f"embedding {embedded:,}/{total:,} chunks (search is hybrid over those)"
            pct = int(100 * embedded / total)
            server.post(
                lambda: progress.report(token, types.WorkDoneProgressReport(message=text, percentage=pct))
            )
        server.post(send_status)

    message = "done"
    told = False  # the client has the final state and the listeners ran on it
    try:
        from mnemo.embeddings import Preparable, prepare  # the core: after `initialize`

        if prepare_model and isinstance(memory.embedder, Preparable):
            if has_progress:
                progress.report(token, types.WorkDoneProgressReport(message=LOADING_MODEL, percentage=0))
            await asyncio.to_thread(prepare, memory.embedder)
        memory.embed_in_background(server.index_cancel)  # the sync returns once keywords are searchable
        report_ = await asyncio.to_thread(memory.sync, full=full, progress=report, cancel=server.index_cancel)
        message = f"{report_.files_indexed} file(s) indexed in {report_.keyword_seconds:.1f}s" + (
            f", {report_.chunks_pending:,} chunk(s) to embed" if report_.chunks_pending else ""
        )
        for path, problem in report_.problems:
            log.warning("%s: %s", path, problem)
        send_status()
        for listener in server.index_listeners:
            listener()
        told = True
        if report_.chunks_pending:
            told = False  # the vectors change the state again
            done = await asyncio.to_thread(memory.wait_for_vectors, embedding, server.index_cancel)
            embedded, total = memory.vector_counts()
            message += f"; {embedded:,} of {total:,} chunks embedded" + ("" if done else " (paused)")
    except Exception as exc:
        message = f"indexing failed: {exc}"
        log.error("indexing failed: %s (see the server log)", exc, exc_info=True)
    finally:
        if has_progress:
            progress.end(token, types.WorkDoneProgressEnd(message=message))
        if not told:
            send_status()
            for listener in server.index_listeners:
                listener()


def register(server: MnemoLanguageServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: MnemoLanguageServer, params: types.InitializeParams) -> None:
        ls.root = _root_from(params, ls).resolve()
        ls.lifeline.watch_client(params.process_id)  # the editor, when it is not our direct parent

    @server.feature(types.INITIALIZED)
    async def initialized(ls: MnemoLanguageServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        ls.log_handler.flush_buffer()
        assert ls.root is not None
        services = await asyncio.to_thread(ls.start_services, ls.root)
        for problem in services.problems:
            log.warning("%s", problem)
        from mnemo.lsp.approver import install_lsp_approvals  # the policy modules: after `initialize`

        install_lsp_approvals(ls)  # the editor answers every gate's approvals (chat and mnemo/exec)
        ls.index_task = asyncio.create_task(index_in_background(ls, prepare_model=ls.index_writer))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: MnemoLanguageServer, params: None) -> None:
        ls.shutdown_requested = True
        ls.index_cancel.set()
        if ls.services is not None:  # nobody is left to answer: waiting tools get a denial now
            for request in ls.services.approvals.pending():
                ls.services.approvals.resolve(request.id, "deny", by="shutdown")

    @server.feature(types.EXIT)
    def exit_(ls: MnemoLanguageServer, params: None) -> None:
        # pygls then ends the event loop, which would wait for a running index job: end within a deadline.
        ls.client_gone("the client sent exit", 0 if ls.shutdown_requested else 1)

    @server.feature(protocol.STATUS)
    async def status(ls: MnemoLanguageServer, params: Any) -> dict[str, Any]:
        return wire.server_status(await asyncio.to_thread(ls.core.status))

    @server.command(protocol.CMD_REINDEX)
    async def reindex(ls: MnemoLanguageServer, *args: Any) -> dict[str, Any]:
        full = bool(args and isinstance(args[0], dict) and args[0].get("full"))
        if ls.index_task is not None and not ls.index_task.done():
            ls.index_cancel.set()
            await asyncio.gather(ls.index_task, return_exceptions=True)
        ls.index_task = asyncio.create_task(index_in_background(ls, full=full))
        await ls.index_task
        return wire.index_status(await asyncio.to_thread(ls.core.memory.status))
