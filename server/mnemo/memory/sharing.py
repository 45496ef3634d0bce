"""One index writer per workspace across processes: the editor's server and the gateway share one index.

DuckDB lets one process open the index file for writing. The first mnemo process of a workspace takes
the *writer lease* (an ``flock`` on ``<index dir>/writer.lock``), opens the index and serves the others
over a Unix socket (mode 0600: this user only): ``search``, ``status`` and ``changed`` (a follower wrote
memory files; the writer re-indexes them). Followers read files themselves (``memory_get`` needs no
index). Readers never see a half-built index: only the writer builds, into a new file that it swaps in.

The editor's server is preferred as the writer (it needs the index for hovers and diagnostics): when it
starts while a gateway holds the lease, it asks the gateway to *yield*; the gateway closes the index,
drops the lease and follows. When the writer exits, the lease is free, and the next follower call takes
it over (and re-syncs the index).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import socketserver
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo.errors import IndexUnavailable, MnemoError
from mnemo.memory.service import MemoryService

log = logging.getLogger(__name__)

LOCK_FILE = "writer.lock"
INFO_FILE = "writer.json"
MAX_LINE = 4_000_000
YIELD_WAIT_S = 15.0


def socket_path_for(index_dir: Path) -> Path:
    """``<index dir>/memory.sock``, or a per-user temp path when that is too long for a Unix socket."""
    path = index_dir / "memory.sock"
    if len(str(path)) < 100:
        return path
    digest = hashlib.sha256(str(index_dir).encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"mnemo-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    return base / f"{digest}.sock"


class _Outcome:
    """A search outcome received from the writer (what callers use of SearchOutcome: ``as_dict``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.results = data.get("results", [])
        self.notes = data.get("notes", [])

    def as_dict(self) -> dict[str, Any]:
        return self.data


def _call(path: Path, request: dict[str, Any], timeout_s: float = 120.0) -> Any:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode("utf-8") + b"\n")
        with sock.makefile("rb") as stream:
            line = stream.readline(MAX_LINE)
    if not line:
        raise ConnectionError("the index writer closed the connection")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise MnemoError(str(reply.get("error", "the index writer failed")))
    return reply.get("result")


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

    # -- the lease ------------------------------------------------------------------------------------
    @property
    def is_writer(self) -> bool:
        return self._lock_fd is not None

    def holder(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.dir / INFO_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None

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
        if self.role == "editor" and holder.get("role") == "gateway":
            try:
                _call(Path(holder["socket"]), {"op": "yield", "role": self.role}, timeout_s=YIELD_WAIT_S)
            except (OSError, MnemoError, KeyError, ValueError) as exc:
                log.warning("the gateway did not yield the index: %s", exc)
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
                os.close(self._lock_fd)
                self._lock_fd = None

    close = release

    # -- serving followers (writer only) -----------------------------------------------------------------
    def _serve(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        shared = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
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
            found = self.memory.search(
                args["query"],
                max_results=args.get("maxResults"),
                record=args.get("record", True),
                filters=args.get("filters"),
            )
            return found.as_dict()
        if op == "status":
            return self.memory.status()
        if op == "changed":
            self.memory.sync()
            return {"synced": True}
        if op == "yield":
            if self.role == "gateway" and request.get("role") == "editor":
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
                return _call(Path(holder["socket"]), request)
            except (OSError, ValueError, KeyError):
                time.sleep(0.2)  # the writer is changing hands; try again (or take the lease)
        raise IndexUnavailable("the index writer (another mnemo process) is not answering; try again")

    def search(
        self, query: str, *, max_results: int | None = None, record: bool = True, filters: Any = None
    ) -> Any:
        """Searched by the writer; ``record=False``: not counted in retrieval statistics; ``filters``:
        a JSON object (:mod:`mnemo.search.filters`)."""
        if not self.is_writer:
            args = {"query": query, "maxResults": max_results, "record": record, "filters": filters}
            got = self._remote({"op": "search", "args": args})
            if got is not None:
                return _Outcome(got)
        return self.memory.search(query, max_results=max_results, record=record, filters=filters)

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        return self.memory.get(path, from_line, lines)

    def status(self) -> dict[str, Any]:
        if not self.is_writer:
            got = self._remote({"op": "status"})
            if got is not None:
                return {**got, "writer": "another process", "role": self.role}
        self.memory.ensure_open()
        return {**self.memory.status(), "writer": "this process", "role": self.role}

    def changed(self) -> None:
        """Memory files changed on disk (the agent wrote one): have the writer re-index."""
        if self.is_writer or self._remote({"op": "changed"}) is None:
            self.memory.sync()
