"""Answering ``initialize`` before pygls loads (issue 19: ``initialize`` <= 500 ms from spawn).

Importing pygls and lsprotocol (about a thousand attrs classes) is most of a server's start. Our answer
to ``initialize`` depends only on the features mnemo registers and on what the client sends, so a start
records the answer pygls gives, keyed by both: mnemo's, pygls's and lsprotocol's versions, the size and
mtime of every module of this package (the features), and the client's ``capabilities``,
``initializationOptions`` and ``clientInfo``. A later start with the same key sends the recorded answer as
soon as the request is read, then loads pygls, which still handles the same request (the workspace root,
the client's capabilities): its own answer is dropped, and if it differs from the one sent it replaces
the record (logged), so a stale record could last one session at most. With no record for the client
yet (the first start after an install or upgrade), the answer shipped with the package is sent
(:mod:`mnemo.lsp.shipped_answer`) and pygls's is recorded. Only the standard library here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO

from mnemo import __version__

log = logging.getLogger(__name__)

CACHE_ENV = "MNEMO_CACHE_DIR"
HEADER_LIMIT = 64 * 1024
KEYED_PARAMS = ("capabilities", "initializationOptions", "clientInfo", "locale", "trace")


def _cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV, "").strip()
    if env:
        return Path(env).expanduser() / "lsp"
    import platformdirs

    return Path(platformdirs.user_cache_dir("mnemo")) / "lsp"


def _features_stamp() -> list[tuple[str, int, int]]:
    """(path, size, mtime) of this package's modules: a changed feature means another answer."""
    here = Path(__file__).resolve().parent
    stamp = []
    for folder in (here, here / "handlers"):
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    stamp.append((f"{folder.name}/{entry.name}", st.st_size, st.st_mtime_ns))
    return sorted(stamp)


def _packages_stamp() -> list[tuple[str, int, int]]:
    """pygls's and lsprotocol's installed modules (a stat each, instead of reading package metadata)."""
    stamp = []
    for name in ("pygls", "lsprotocol"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            st = os.stat(spec.origin)
            stamp.append((spec.origin, st.st_size, st.st_mtime_ns))
    return stamp


def record_key(params: dict[str, Any]) -> str:
    """What the answer to ``initialize`` depends on, hashed."""
    keyed = {name: params.get(name) for name in KEYED_PARAMS}
    blob = json.dumps([__version__, _packages_stamp(), _features_stamp(), keyed], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    head = f"Content-Length: {len(body)}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
    return head.encode("ascii") + body


def _read_message(stream: BinaryIO) -> tuple[bytes, dict[str, Any] | None]:
    """The first message's bytes as read (to hand to pygls unchanged) and its JSON (None: unreadable)."""
    raw = b""
    length = -1
    while len(raw) < HEADER_LIMIT:
        line = stream.readline()
        raw += line
        if not line:
            return raw, None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            length = int(value.strip())
    if length < 0:
        return raw, None
    body = stream.read(length)
    raw += body
    try:
        message = json.loads(body)
    except ValueError:
        return raw, None
    return raw, message if isinstance(message, dict) else None


class QuickStart:
    """The first message read before pygls loads, and whether ``initialize`` was answered from a record."""

    def __init__(
        self, first: bytes, request: dict[str, Any] | None, key: str | None, sent: Any, shipped: bool = False
    ) -> None:
        self.first = first
        self.request_id = request.get("id") if request else None
        self.key = key
        self.sent = sent
        """The result sent before pygls loaded (None: pygls answers)."""
        self.shipped = shipped
        """Whether :attr:`sent` is the package's shipped answer (no record for this client yet)."""

    @classmethod
    def read(cls, stdin: BinaryIO, stdout: BinaryIO) -> QuickStart:
        first, message = _read_message(stdin)
        if message is None or message.get("method") != "initialize" or "id" not in message:
            return cls(first, None, None, None)
        params = message.get("params")
        try:
            key = record_key(params if isinstance(params, dict) else {})
        except (OSError, ValueError):
            return cls(first, None, None, None)
        shipped = False
        try:
            recorded = json.loads((_cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            from mnemo.lsp.shipped_answer import shipped_answer

            recorded, shipped = shipped_answer(), True
        stdout.write(frame({"jsonrpc": "2.0", "id": message["id"], "result": recorded}))
        stdout.flush()
        return cls(first, message, key, recorded, shipped)

    def reader(self, stream: Any) -> _Replay:
        return _Replay(self.first, stream)

    def writer(self, stdout: BinaryIO) -> _AnswerFilter:
        return _AnswerFilter(self, stdout)

    def answered(self, result: Any) -> bool:
        """pygls's answer to ``initialize``: recorded; True when it must be dropped (already sent)."""
        if self.key is None:
            return False
        if self.shipped:  # recorded for this client's next start, whether or not it differs
            if result != self.sent:
                log.info("this client gets another answer to initialize than the shipped one; recorded")
            self._record(result)
        elif self.sent is None or result != self.sent:
            if self.sent is not None:
                log.warning("the recorded answer to initialize was out of date; recorded again")
            self._record(result)
        return self.sent is not None

    def _record(self, result: Any) -> None:
        folder = _cache_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(result, out)
            os.replace(tmp, folder / f"{self.key}.json")
        except OSError as exc:
            log.info("cannot record the answer to initialize: %s", exc)


class _Replay:
    """The client's stream for pygls: the message read before pygls loaded, then the rest."""

    def __init__(self, first: bytes, stream: Any) -> None:
        self.pending = first
        self.stream = stream

    def readline(self) -> bytes:
        if self.pending:
            end = self.pending.find(b"\n")
            cut = len(self.pending) if end < 0 else end + 1
            line, self.pending = self.pending[:cut], self.pending[cut:]
            return line if line.endswith(b"\n") else line + bytes(self.stream.readline())
        return bytes(self.stream.readline())

    def read(self, n: int) -> bytes:
        if self.pending:
            data, self.pending = self.pending[:n], self.pending[n:]
            return data if len(data) == n else data + bytes(self.stream.read(n - len(data)))
        return bytes(self.stream.read(n))


class _AnswerFilter:
    """pygls's stdout: its answer to the ``initialize`` read early is recorded, and dropped if already sent."""

    def __init__(self, quick: QuickStart, stdout: BinaryIO) -> None:
        self.quick = quick
        self.stdout = stdout
        self.done = quick.request_id is None

    def write(self, data: bytes) -> int:
        if not self.done:
            head, _, body = data.partition(b"\r\n\r\n")
            try:
                message = json.loads(body) if head.lower().startswith(b"content-length") else None
            except ValueError:
                message = None
            if (
                isinstance(message, dict)
                and message.get("id") == self.quick.request_id
                and "method" not in message
            ):
                self.done = True
                if "result" in message and self.quick.answered(message["result"]):
                    return len(data)
        return self.stdout.write(data)

    def flush(self) -> None:
        self.stdout.flush()

    def close(self) -> None:
        self.stdout.close()
