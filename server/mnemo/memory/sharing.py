"""One index writer per workspace across processes: the editor's server and the gateway share one index.

DuckDB lets one process open the index file for writing. The first mnemo process of a workspace takes
the *writer lease* (an ``flock`` on ``<index dir>/writer.lock``), opens the index and serves the others
over a Unix socket (mode 0600: this user only): ``search``, ``status`` and ``changed`` (a follower wrote
memory files; the writer re-indexes them). Followers read files themselves (``memory_get`` needs no
index). Readers never see a half-built index: only the writer builds, into a new file that it swaps in.

The editor's server is preferred as the writer (it needs the index for hovers and diagnostics): when it
starts while a gateway or a daemon holds the lease, it asks it to *yield*; a gateway closes the index,
drops the lease and follows, a daemon exits. When the writer exits, the lease is free, and the next
follower call takes it over (and re-syncs the index).

The command line is a client too (:func:`mnemo.memory.writer_client.ask_writer`): `mnemo search`, `get`, `status` and `index` ask
the writer when one runs (the editor's server, the gateway, or `mnemo serve --daemon`, which holds the
lease for scripts and exits after idle minutes), and work alone otherwise. A writer record whose socket
no longer answers (the writer was killed) is ignored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mnemo.errors import IndexUnavailable, MnemoError
from mnemo.memory import codec
from mnemo.memory.reading import FileLines
from mnemo.memory.status import IndexStatus
from mnemo.memory.turns import FeedbackResult
from mnemo.memory.writer_client import (
    INFO_FILE,
    LOCK_FILE,
    MAX_LINE,
    call,
    socket_path_for,
    writer_record,
)
from mnemo.search.results import SearchOutcome

if TYPE_CHECKING:  # the command line's client (ask_writer) loads no index machinery
    from mnemo.index.file_rows import SyncReport
    from mnemo.memory.service import MemoryService

log = logging.getLogger(__name__)

T = TypeVar("T")
YIELD_WAIT_S = 15.0
YIELDING_ROLES = ("gateway", "daemon")
"""Writers that hand the index to an editor's server when it starts."""


class SharedMemory:
    """The memory of a process that may or may not hold the writer lease (same calls either way)."""

    def __init__(self, memory: MemoryService, role: str) -> None:
        self.memory = memory
        self.role = role
        self.dir = memory.indexer.dir
        self.socket_path = socket_path_for(self.dir)
        self._lock_fd: int | None = None
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._state = threading.RLock()
        self.on_writer: Callable[[], None] | None = None
        """Called (in a thread) after this process becomes the writer: start a sync there."""
        self.last_request = time.monotonic()
        """When a follower last asked something (a daemon exits after idle minutes)."""

    # -- the lease ------------------------------------------------------------------------------------
    @property
    def is_writer(self) -> bool:
        return self._lock_fd is not None

    def holder(self) -> dict[str, Any] | None:
        return writer_record(self.dir)

    def try_acquire(self) -> bool:
        with self._state:
            if self._lock_fd is not None:
                return True
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._lock_fd = fd
            self.memory.reclaim_index()
            self._serve()
            info = {"pid": os.getpid(), "role": self.role, "socket": str(self.socket_path)}
            tmp = self.dir / (INFO_FILE + ".tmp")
            tmp.write_text(json.dumps(info), encoding="utf-8")
            os.replace(tmp, self.dir / INFO_FILE)
            log.info("%s is the index writer for %s", self.role, self.dir)
            self.memory.embed_in_background()  # a server: syncs return once keywords are searchable
        if self.on_writer is not None:
            threading.Thread(target=self.on_writer, name="mnemo-writer-sync", daemon=True).start()
        return True

    def start(self) -> bool:
        """Take the lease, asking a gateway writer to yield when this is an editor. True: writer.

        False also when the lease cannot be taken at all (a read-only workspace): the process keeps
        running, and its searches say why the index is unavailable."""
        try:
            return self._start()
        except OSError as exc:
            log.warning("cannot take the index writer lease in %s: %s", self.dir, exc)
            return False

    def _start(self) -> bool:
        if self.try_acquire():
            return True
        holder = self.holder() or {}
        if self.role == "editor" and holder.get("role") in YIELDING_ROLES:
            try:
                call(Path(holder["socket"]), {"op": "yield", "role": self.role}, timeout_s=YIELD_WAIT_S)
            except (OSError, MnemoError, KeyError, ValueError) as exc:
                log.warning("the %s did not yield the index: %s", holder.get("role"), exc)
            deadline = time.monotonic() + YIELD_WAIT_S
            while time.monotonic() < deadline:
                if self.try_acquire():
                    return True
                time.sleep(0.05)
        return False

    def release(self) -> None:
        """Stop serving, close the index, drop the lease (this process becomes a follower)."""
        with self._state:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None
                with contextlib.suppress(OSError):
                    self.socket_path.unlink()
            self.memory.release_index()
            if self._lock_fd is not None:
                self._forget_record()  # while the lease is held: no later writer's record yet
                os.close(self._lock_fd)
                self._lock_fd = None

    close = release

    def _forget_record(self) -> None:
        """Remove this writer's ``writer.json``: a command started after this one exits then opens the
        index itself at once, instead of trying a socket nobody listens on."""
        record = writer_record(self.dir)
        if record is not None and record.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                (self.dir / INFO_FILE).unlink()

    # -- serving followers (writer only) -----------------------------------------------------------------
    def _serve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        shared = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                shared.last_request = time.monotonic()
                try:
                    request = json.loads(self.rfile.readline(MAX_LINE))
                    result = shared._answer(request)
                    reply = {"ok": True, "result": result}
                except Exception as exc:  # every failure goes back to the follower as a message
                    reply = {"ok": False, "error": str(exc)}
                self.wfile.write(json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n")

        old_umask = os.umask(0o177)
        try:
            server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        finally:
            os.umask(old_umask)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="mnemo-index-host", daemon=True).start()
        self._server = server

    def _answer(self, request: dict[str, Any]) -> Any:
        op, args = request.get("op"), request.get("args", {})
        if op == "search":
            if args.get("sync"):  # the command line's search: files may have changed on disk
                self.memory.sync()
            found = self.memory.search(
                args["query"],
                max_results=args.get("maxResults"),
                min_score=args.get("minScore"),
                sources=args.get("sources"),
                record=args.get("record", True),
                filters=args.get("filters"),
                one_per_file=args.get("onePerFile"),
            )
            return codec.encode_outcome(found)
        if op == "status":
            self.memory.ensure_open()
            return codec.encode_status(self.memory.status())
        if op == "get":
            return dataclasses.asdict(self.memory.get(args["path"], args.get("from"), args.get("lines")))
        if op == "changed":
            self.memory.sync()
            return {"synced": True}
        if op == "index":  # `mnemo index` while a server runs: the writer syncs (vectors follow there)
            report = self.memory.sync(full=bool(args.get("full")), replace="any")
            return dataclasses.asdict(report)
        if op == "feedback":  # a gateway's chat.feedback: the writer records it
            done = self.memory.record_feedback(args["sessionId"], args.get("turn"), bool(args["useful"]))
            return codec.encode_feedback(done)
        if op == "ping":
            return {"pid": os.getpid(), "role": self.role}
        if op == "yield":
            if self.role in YIELDING_ROLES and request.get("role") == "editor":
                threading.Thread(target=self.release, name="mnemo-yield", daemon=True).start()
                return {"yielding": True}
            return {"yielding": False}
        raise MnemoError(f"unknown operation {op!r}")

    # -- the memory calls ----------------------------------------------------------------------------
    def _remote(self, request: dict[str, Any]) -> Any:
        for _attempt in range(3):
            if self.is_writer or self.try_acquire():
                return None
            holder = self.holder()
            try:
                if holder is None:
                    raise ConnectionError("no writer information")
                return call(Path(holder["socket"]), request)
            except (OSError, ValueError, KeyError):
                time.sleep(0.2)  # the writer is changing hands; try again (or take the lease)
        raise IndexUnavailable("the index writer (another mnemo process) is not answering; try again")

    def _by_writer(self, request: dict[str, Any], decode: Callable[[Any], T], local: Callable[[], T]) -> T:
        """Asked of the writer when another process is it, else done here. A call that finds the index
        handed over on its way (this process yielded it to an editor's server) asks the new writer."""
        for handed_over in (False, True):
            if not self.is_writer:
                got = self._remote(request)
                if got is not None:
                    return decode(got)
            try:
                return local()
            except IndexUnavailable:
                if handed_over or self.is_writer:
                    raise
        raise AssertionError("unreachable")

    def sync_if_writer(self) -> SyncReport | None:
        """Sync the index when this process writes it; None when it does not (or yielded it meanwhile)."""
        if not self.is_writer:
            return None
        try:
            return self.memory.sync()
        except IndexUnavailable:
            if self.is_writer:
                raise
            return None

    def search(
        self, query: str, *, max_results: int | None = None, record: bool = True, filters: Any = None
    ) -> SearchOutcome:
        """Searched by the writer; ``record=False``: not counted in retrieval statistics; ``filters``:
        a JSON object (:mod:`mnemo.search.filters`)."""
        args = {"query": query, "maxResults": max_results, "record": record, "filters": filters}
        return self._by_writer(
            {"op": "search", "args": args},
            codec.decode_outcome,
            lambda: self.memory.search(query, max_results=max_results, record=record, filters=filters),
        )

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> FileLines:
        return self.memory.get(path, from_line, lines)

    def record_feedback(self, session_id: str, turn: int | None, useful: bool) -> FeedbackResult:
        """Feedback on a chat turn (:mod:`mnemo.memory.feedback`), recorded by the writer."""
        args = {"sessionId": session_id, "turn": turn, "useful": useful}
        return self._by_writer(
            {"op": "feedback", "args": args},
            codec.decode_feedback,
            lambda: self.memory.record_feedback(session_id, turn, useful),
        )

    def status(self) -> IndexStatus:
        return self._by_writer(
            {"op": "status"},
            lambda got: codec.decode_status(got).shared("another process", self.role),
            self._local_status,
        )

    def _local_status(self) -> IndexStatus:
        self.memory.ensure_open()
        return self.memory.status().shared("this process", self.role)

    def changed(self) -> None:
        """Memory files changed on disk (the agent wrote one): have the writer re-index."""
        self._by_writer({"op": "changed"}, lambda _got: None, self._sync_here)

    def _sync_here(self) -> None:
        self.memory.sync()
