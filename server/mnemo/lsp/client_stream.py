"""The client's two streams as pygls reads and writes them: stdin that reports its end, and stdout whose
write errors end the connection instead of looping.

pygls reports a failed write to the client as an error message *to the client*, through the same stream,
which fails again: recursively (seen once in a benchmark: the server stuck writing that cascade to a
stderr pipe nobody read, its client waiting for an answer). A stream that can no longer take a message
means the client is gone: :class:`ClientWriter` raises ``BrokenPipeError``, which pygls treats as the
connection lost, and tells the server. A pipe left non-blocking by another process sharing it is waited
on (up to :data:`STALL_S`) rather than failed.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from typing import Any, BinaryIO

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
