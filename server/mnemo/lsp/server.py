"""MnemoLanguageServer: pygls server state plus the thread-safe plumbing the handlers share."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lsprotocol import types
from pygls.exceptions import JsonRpcContentModified, JsonRpcException
from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from mnemo import __version__
from mnemo.lifeline import Lifeline, exit_soon
from mnemo.lsp.client_stream import MessageReader

if TYPE_CHECKING:
    from mnemo.services import Services

SERVICES_WAIT_S = 60.0
"""How long a worker thread waits for the services; the event loop never waits (:class:`ServerStarting`)."""

log = logging.getLogger(__name__)


class LspLogHandler(logging.Handler):
    """Forwards warnings and errors to the client as window/logMessage, buffered until initialized."""

    def __init__(self, server: MnemoLanguageServer) -> None:
        super().__init__(logging.WARNING)
        self.server = server
        self.buffer: list[tuple[types.MessageType, str]] = []
        self._buffer_lock = threading.Lock()  # a worker thread's record vs. the flush at initialized

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("pygls"):
            return
        kind = types.MessageType.Error if record.levelno >= logging.ERROR else types.MessageType.Warning
        message = self.format(record)
        with self._buffer_lock:
            if self.server.loop is None:
                self.buffer.append((kind, message))
                return
        self.server.post(lambda: self.server.window_log_message(types.LogMessageParams(kind, message)))

    def flush_buffer(self) -> None:
        with self._buffer_lock:
            buffered, self.buffer = self.buffer, []
        for kind, message in buffered:
            self.server.window_log_message(types.LogMessageParams(kind, message))


class ServerStarting(JsonRpcContentModified):
    """A request that reached the services before ``initialized`` finished opening them. The event
    loop never waits for them (it would stop every other message); the client may ask again. LSP's
    ContentModified: editors drop the answer of a standard request quietly."""

    MESSAGE = "mnemo is still starting (opening the workspace's index); try again in a moment"


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class MnemoProtocol(LanguageServerProtocol):
    """pygls's protocol with what mnemo's clients may count on:

    - every column mnemo computes is in UTF-16 code units (LSP's default), so the server says so whatever
      encodings the client lists: pygls takes the client's first, and Neovim lists utf-8 first, which read
      every range after a non-ASCII character wrongly (a "Redact secret" edit left the secret's tail);
    - a request is always answered: one without ``params`` (JSON-RPC lets it leave them out) is read as
      ``null`` params, and one pygls cannot read (a hover at line -1) gets its error, where pygls logged
      it and the client waited for good."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data and "method" in data and "params" not in data:
            data = {**data, "params": None}
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "jsonrpc" in data and "method" in data and "id" in data:
                self._send_response(data["id"], error=exc.to_response_error())
            raise

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [types.PositionEncodingKind.Utf16]
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        return result


class MnemoLanguageServer(LanguageServer):
    def __init__(self, workspace: Path | None = None) -> None:
        super().__init__(
            "mnemo",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full,
            protocol_cls=MnemoProtocol,
        )
        self.requested_workspace = workspace
        self.services: Services | None = None
        self.root: Path | None = None
        self.services_ready = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.index_task: asyncio.Task[Any] | None = None
        self.index_cancel = threading.Event()
        self.index_writer = False
        """This process holds the workspace's index (else another mnemo process answers its searches)."""
        self.log_handler = LspLogHandler(self)
        self.document_listeners: list[Callable[[str], None]] = []
        """Called on the event loop with a document's URI after it is opened, changed or saved."""
        self.index_listeners: list[Callable[[], None]] = []
        """Called on the event loop after each background index sync (successful or not)."""
        self.shutdown_requested = False
        self.lifeline = Lifeline(self.client_gone)
        """Ends the server when the editor goes away without ``exit`` (see :mod:`mnemo.lifeline`)."""
        self._gone = threading.Event()
        self._gone_lock = threading.Lock()
        self._last_index_status: dict[str, Any] | None = None
        self._close_lock = threading.Lock()
        self._deferred: list[Callable[[], None]] = []
        """Notification work waiting for the services, run in order on the event loop once they are up."""

    # -- services -------------------------------------------------------------------------------
    def start_services(self, root: Path) -> Services:
        """Build the core for the workspace the client opened. Its imports (DuckDB, NumPy) are paid
        here, after ``initialize`` has been answered; the embedding model loads next, in the indexing
        task (:func:`mnemo.lsp.handlers.lifecycle.index_in_background`)."""
        from mnemo.services import build_services

        try:
            services = build_services(root)
            # One index writer per workspace: a gateway serving this workspace hands the index over.
            # Shared before any handler can reach the agent, which then searches through it too.
            self.index_writer = services.share_index("editor").start()
            if not self.index_writer:
                log.warning("another mnemo process writes this workspace's index")
            services.memory.on_vectors_ready(lambda: self.post(self.index_changed))
            self.services = services
        finally:
            self.services_ready.set()
            self.post(self._run_deferred)
        return services

    @property
    def core(self) -> Services:
        """The services. On the event loop before they are up: :class:`ServerStarting` at once (the
        request gets an answer, other messages keep flowing); on a worker thread: wait up to
        :data:`SERVICES_WAIT_S`."""
        if self.services is None and not self.services_ready.is_set():
            if _on_event_loop():
                raise ServerStarting()
            self.services_ready.wait(SERVICES_WAIT_S)
        if self.services is None:
            raise RuntimeError("the server is not initialized")
        return self.services

    async def wait_for_services(self) -> None:
        """Until the services are up (or failed), without holding the event loop."""
        if self.services is None and not self.services_ready.is_set():
            await asyncio.to_thread(self.services_ready.wait, SERVICES_WAIT_S)

    def feature(self, feature_name: str, options: Any | None = None) -> Callable[[Any], Any]:
        """pygls' registration; mnemo's own requests (``mnemo/…``) first wait for the services without
        blocking the loop, so a client that asks right after ``initialized`` gets its answer, not
        "still starting". Standard requests (hover, code lens, …) get ContentModified then."""
        register = super().feature(feature_name, options)
        if not feature_name.startswith("mnemo/"):
            return register

        def wrap(handler: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(handler)
            async def when_up(ls: MnemoLanguageServer, params: Any) -> Any:
                await ls.wait_for_services()
                result = handler(ls, params)
                return await result if inspect.isawaitable(result) else result

            register(when_up)
            return handler

        return wrap

    def when_ready(self, fn: Callable[[], None]) -> None:
        """On the event loop: run ``fn`` now if the services are up, else once they are (in the order
        asked; dropped if they fail to start). For notifications, which have no answer to wait on."""
        if self.services is not None and not self._deferred:
            fn()
        elif self.services is None and self.services_ready.is_set():
            return  # the services failed to start or are closed: nothing to feed
        else:
            self._deferred.append(fn)

    def _run_deferred(self) -> None:
        waiting, self._deferred = self._deferred, []
        if self.services is None:
            return
        for fn in waiting:
            try:
                fn()
            except Exception:
                log.exception("deferred document notification failed")

    def index_changed(self) -> None:
        """On the event loop: tell the client the index state and run the index listeners (after a
        sync, and when background embedding has caught up)."""
        from mnemo import wire

        if self.services is None:
            return
        self.send_index_status(wire.index_status(self.services.memory.status()))
        for listener in self.index_listeners:
            listener()

    def send_index_status(self, status: dict[str, Any]) -> None:
        """``mnemo/indexStatus`` (on the event loop), unless the client was just told exactly that: a
        progress note queued during a sync may run after the sync's own final one."""
        from mnemo.lsp import protocol

        if status == self._last_index_status:
            return
        self._last_index_status = status
        self.protocol.notify(protocol.INDEX_STATUS, status)

    # -- threads ----------------------------------------------------------------------------------
    def post(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the event loop (pygls writes to the client only from there)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn)

    def _start_io_async(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls's stdio loop (pinned pygls 2.1.1), with the client's stream read by
        :class:`~mnemo.lsp.client_stream.MessageReader`: one thread and one wake-up of the event loop a
        message, where pygls hands each header line and each body to its thread pool."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = MessageReader(stdin or sys.stdin.buffer)
        try:
            asyncio.run(
                run_async(
                    stop_event=self._stop_event,
                    reader=reader,
                    protocol=self.protocol,
                    logger=log,
                    error_handler=self.report_server_error,
                )
            )
        except BrokenPipeError:
            log.error("Connection to the client is lost! Shutting down the server.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def close_services(self) -> None:
        self.index_cancel.set()
        with self._close_lock:  # the exit thread and the main thread may both get here
            if self.services is not None:
                self.services.close()
                self.services = None

    def client_gone(self, reason: str, code: int = 0) -> None:
        """The client has quit, closed stdin or died: stop work, close the index, end the process.

        Worker threads (indexing, embedding, a chat turn) cannot be interrupted and the interpreter
        would wait for them at exit, so the process ends within :data:`~mnemo.lifeline.EXIT_GRACE_S`
        whatever they are doing."""
        with self._gone_lock:  # the lifeline, stdin's end and `exit` can each call this at once
            if self._gone.is_set():
                return
            self._gone.set()
        log.info("mnemo serve: %s; exiting", reason)
        self.lifeline.stop()
        self.index_cancel.set()
        services = self.services
        if services is not None:  # nobody is left to answer: waiting tools get a denial now
            for request in services.approvals.pending():
                services.approvals.resolve(request.id, "deny", by="client gone")
        exit_soon(self.close_services, code)


def parse_host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ws expects HOST:PORT, got {value!r}")
    return host, int(port)
