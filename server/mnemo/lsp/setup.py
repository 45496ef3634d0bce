"""The one place where the LSP server is created and its features registered, and ``mnemo serve``.

Creation lives here, not in :mod:`mnemo.lsp.server`: the handlers import the server class, and the
server module imports no handler (no import circle)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from mnemo.lsp.client_stream import ClientWriter, EofReader
from mnemo.lsp.handlers import (
    actions,
    approvals,
    archive,
    chat,
    consolidate,
    diagnostics,
    documents,
    feedback,
    insight,
    lifecycle,
    search,
    security,
    vcs,
)
from mnemo.lsp.quick_start import QuickStart
from mnemo.lsp.server import MnemoLanguageServer, parse_host_port

log = logging.getLogger(__name__)


def register_features(server: MnemoLanguageServer) -> None:
    lifecycle.register(server)
    documents.register(server)
    search.register(server)
    approvals.register(server)
    insight.register(server)
    diagnostics.register(server)
    actions.register(server)
    consolidate.register(server)
    feedback.register(server)
    vcs.register(server)
    security.register(server)
    archive.register(server)
    chat.register(server)  # last: another module may own textDocument/codeAction


def create_server(workspace: Path | None = None) -> MnemoLanguageServer:
    server = MnemoLanguageServer(workspace)
    register_features(server)
    logging.getLogger("mnemo").addHandler(server.log_handler)
    return server


def serve(workspace: Path | None, ws: str | None = None, quick: QuickStart | None = None) -> int:
    """Serve until the client goes: ``exit``, stdin closed, parent or client process gone."""
    address = parse_host_port(ws) if ws else None
    if address and address[0] not in ("127.0.0.1", "localhost", "::1"):
        log.error("refusing to serve LSP on non-loopback address %s: it has no authentication", address[0])
        return 2
    from mnemo.server_malloc import tune_for_server

    tune_for_server()  # before the server's threads allocate
    server = create_server(workspace)
    server.lifeline.start()
    try:
        if address:
            server.start_ws(*address)
        else:
            stdin: Any = EofReader(sys.stdin.buffer, lambda: server.client_gone("stdin closed"))
            stdout: Any = sys.stdout.buffer
            if quick is not None:  # `initialize` was read (and maybe answered) before pygls loaded
                stdin, stdout = quick.reader(stdin), quick.writer(stdout)
            stdout = ClientWriter(stdout, server.client_gone)
            server.start_io(stdin=stdin, stdout=stdout)
    finally:
        server.client_gone("the connection ended")
        server.close_services()
    return 0
