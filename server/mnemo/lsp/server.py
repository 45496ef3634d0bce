"""MnemoLanguageServer: pygls server state plus the thread-safe plumbing the handlers share."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from mnemo import __version__

if TYPE_CHECKING:
    from mnemo.services import Services

SERVICES_WAIT_S = 60.0

log = logging.getLogger(__name__)


class LspLogHandler(logging.Handler):
    """Forwards warnings and errors to the client as window/logMessage, buffered until initialized."""

    def __init__(self, server: MnemoLanguageServer) -> None:
        super().__init__(logging.WARNING)
        self.server = server
        self.buffer: list[tuple[types.MessageType, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("pygls"):
            return
        kind = types.MessageType.Error if record.levelno >= logging.ERROR else types.MessageType.Warning
        message = self.format(record)
        if self.server.loop is None:
            self.buffer.append((kind, message))
            return
        self.server.post(lambda: self.server.window_log_message(types.LogMessageParams(kind, message)))

    def flush_buffer(self) -> None:
        for kind, message in self.buffer:
            self.server.window_log_message(types.LogMessageParams(kind, message))
        self.buffer.clear()


class MnemoLanguageServer(LanguageServer):
    def __init__(self, workspace: Path | None = None) -> None:
        super().__init__("mnemo", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.requested_workspace = workspace
        self.services: Services | None = None
        self.root: Path | None = None
        self.services_ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.index_task: asyncio.Task[Any] | None = None
        self.index_cancel = threading.Event()
        self.log_handler = LspLogHandler(self)
        self.document_listeners: list[Callable[[str], None]] = []
        """Called on the event loop with a document's URI after it is opened, changed or saved."""
        self.index_listeners: list[Callable[[], None]] = []
        """Called on the event loop after each background index sync (successful or not)."""

    # -- services -------------------------------------------------------------------------------
    def start_services(self, root: Path) -> Services:
        """Build the core for the workspace the client opened. Its imports (DuckDB, NumPy) are paid
        here, after ``initialize`` has been answered; models load later still, on first use."""
        from mnemo.services import build_services

        try:
            self.services = build_services(root)
            # One index writer per workspace: a gateway serving this workspace hands the index over.
            if not self.services.share_index("editor").start():
                log.warning("another mnemo process writes this workspace's index")
        finally:
            self.services_ready.set()
        return self.services

    @property
    def core(self) -> Services:
        if self.services is None:
            self.services_ready.wait(SERVICES_WAIT_S)
        if self.services is None:
            raise RuntimeError("the server is not initialized")
        return self.services

    # -- threads ----------------------------------------------------------------------------------
    def post(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the event loop (pygls writes to the client only from there)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn)

    def close_services(self) -> None:
        self.index_cancel.set()
        if self.services is not None:
            self.services.close()
            self.services = None


def create_server(workspace: Path | None = None) -> MnemoLanguageServer:
    from mnemo.lsp.setup import register_features

    server = MnemoLanguageServer(workspace)
    register_features(server)
    logging.getLogger("mnemo").addHandler(server.log_handler)
    return server


def parse_host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ws expects HOST:PORT, got {value!r}")
    return host, int(port)


def serve(workspace: Path | None, ws: str | None = None) -> int:
    server = create_server(workspace)
    try:
        if ws:
            host, port = parse_host_port(ws)
            if host not in ("127.0.0.1", "localhost", "::1"):
                log.error("refusing to serve LSP on non-loopback address %s: it has no authentication", host)
                return 2
            server.start_ws(host, port)
        else:
            server.start_io()
    finally:
        server.close_services()
    return 0
