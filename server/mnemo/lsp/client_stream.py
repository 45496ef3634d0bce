"""The client's two streams as pygls reads and writes them: stdin that reports its end and is read by a
thread of its own, and stdout whose write errors end the connection instead of looping.

pygls reads stdin by handing each header line and each body to its thread pool (three hand-offs a
message, each waking a pool thread and then the event loop); :class:`MessageReader` reads a whole message
on one thread of its own, which waits in ``read`` for it, and wakes the event loop once per message.

pygls reports a failed write to the client as an error message *to the client*, through the same stream,
which fails again: recursively (seen once in a benchmark: the server stuck writing that cascade to a
stderr pipe nobody read, its client waiting for an answer). A stream that can no longer take a message
means the client is gone: :class:`ClientWriter` raises ``BrokenPipeError``, which pygls treats as the
connection lost, and tells the server. A pipe left non-blocking by another process sharing it is waited
on (up to :data:`STALL_S`) rather than failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import select
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

STALL_S = 60.0
"""How long a write waits for a client that has stopped reading before the client counts as gone."""


class EofReader:
    """The client's stream (stdin) for pygls, reporting its end: the editor closed the pipe or died."""

    def __init__(self, stream: BinaryIO, on_eof: Callable[[], None]) -> None:
        self.stream = stream
        self.on_eof = on_eof

    def readline(self) -> bytes:
        return self._seen(self.stream.readline())

    def read(self, n: int) -> bytes:
        return self._seen(self.stream.read(n))

    def _seen(self, data: bytes) -> bytes:
        if not data:
            self.on_eof()
        return data


class SyncReader(Protocol):
    def readline(self) -> bytes: ...

    def read(self, n: int) -> bytes: ...


CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
"""pygls's pattern for the header that frames a message (its loop parses the same bytes again)."""

WAKE_BYTES = 1 << 16
"""Header lines this long without their end are handed on before it (a stream that never frames a message)."""


class MessageReader:
    """pygls's asynchronous reader (``readline``/``readexactly``) over a blocking stream, read by one
    daemon thread a whole message at a time: header lines, then the body of its ``Content-Length``.

    When pygls's loop asks for bytes that are not there, the thread reads the next message and wakes
    the event loop once it has it all; pygls then takes its header lines and body without a hand-off.
    The thread reads only when asked, so after ``exit`` it waits on an event, never inside the
    stream's ``read`` (a daemon thread holding stdin's lock aborts the interpreter's exit). The bytes are
    passed on unchanged: a stream not framed as pygls expects reads as before.
    """

    def __init__(self, stream: SyncReader) -> None:
        self.stream = stream
        self._buffer = bytearray()
        self._ended = False
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def readline(self) -> bytes:
        """The next line, its ``\\n`` included (what is left, at the end of the stream)."""
        return await self._take(lambda data: data.find(b"\n") + 1 or None)

    async def readexactly(self, n: int) -> bytes:
        """The next ``n`` bytes (fewer only at the end of the stream)."""
        return await self._take(lambda data: n if len(data) >= n else None)

    async def _take(self, cut: Callable[[bytearray], int | None]) -> bytes:
        while True:
            with self._lock:
                size = cut(self._buffer)
                if size is None and self._ended:
                    size = len(self._buffer)
                if size is not None:
                    data = bytes(self._buffer[:size])
                    del self._buffer[:size]
                    return data
                self._loop = self._loop or asyncio.get_running_loop()
                waiter = self._waiter = self._loop.create_future()
                if self._thread is None:
                    self._thread = threading.Thread(target=self._read, name="mnemo-stdin", daemon=True)
                    self._thread.start()
            self._wanted.set()
            await waiter

    def _read(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._read_message():
                return

    def _read_message(self) -> bool:
        """Read up to the end of a message's body (or of headers without a length), hand it over;
        True at the end of the stream."""
        pieces: list[bytes] = []
        length = 0
        while True:
            line = self.stream.readline()
            if not line:
                self._hand_over(pieces, ended=True)
                return True
            pieces.append(line)
            if not length and (found := CONTENT_LENGTH.fullmatch(line)):
                length = int(found.group(1))
            if not line.strip():  # the headers' end: the body follows when one was framed
                body = self.stream.read(length) if length else b""
                pieces.append(body)
                self._hand_over(pieces, ended=bool(length) and not body)
                return bool(length) and not body
            if sum(map(len, pieces)) > WAKE_BYTES:  # no end of headers in sight: let pygls see them
                self._hand_over(pieces, ended=False)
                pieces = []

    def _hand_over(self, pieces: list[bytes], *, ended: bool) -> None:
        """Add ``pieces`` to what pygls reads, and wake its loop if it waits."""
        with self._lock:
            for piece in pieces:
                self._buffer += piece
            self._ended = self._ended or ended
            waiter, self._waiter = self._waiter, None
        if waiter is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the event loop is closed: the server is ending
                self._loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ClientWriter:
    """The client's stream (stdout) for pygls: every message written and flushed whole, or
    ``BrokenPipeError`` (and ``on_gone`` called once) when the stream can't take it."""

    def __init__(self, stream: Any, on_gone: Callable[[str], None]) -> None:
        self.stream = stream
        self.on_gone = on_gone
        self._gone = False

    def write(self, data: bytes) -> int:
        rest = bytes(data)
        deadline = time.monotonic() + STALL_S
        while True:
            try:
                if rest:
                    self.stream.write(rest)
                    rest = b""
                self.stream.flush()
                return len(data)
            except BlockingIOError as exc:  # a non-blocking pipe, full: wait for the client to read
                rest = rest[exc.characters_written :] if rest else rest
                if time.monotonic() > deadline:
                    raise self._lost(f"the client has read nothing for {STALL_S:.0f} s") from exc
                self._wait_writable()
            except (OSError, ValueError) as exc:  # closed, broken pipe, bad descriptor
                raise self._lost(f"cannot write to the client: {exc}") from exc

    def flush(self) -> None:
        self.write(b"")

    def close(self) -> None:
        self.stream.close()

    def _wait_writable(self) -> None:
        try:
            select.select([], [self.stream.fileno()], [], 1.0)
        except (OSError, ValueError, AttributeError):
            time.sleep(0.05)

    def _lost(self, reason: str) -> BrokenPipeError:
        if not self._gone:
            self._gone = True
            self.on_gone(reason)
        return BrokenPipeError(reason)
