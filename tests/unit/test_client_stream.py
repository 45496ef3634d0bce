"""The LSP server's stdout (mnemo.lsp.client_stream.ClientWriter): a broken stream ends the connection once
instead of pygls's recursive error report through it; a full non-blocking pipe is waited on, not failed.
Its stdin (MessageReader), read by pygls's own loop: whole messages, in order, read only when asked."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import threading
from typing import Any

import pytest

from mnemo.lsp import client_stream
from mnemo.lsp.client_stream import ClientWriter, MessageReader

pytestmark = pytest.mark.timeout(60)


def test_a_closed_client_is_gone_once_and_every_write_says_so() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    gone: list[str] = []
    writer = ClientWriter(os.fdopen(write_end, "wb"), gone.append)
    for _ in range(3):
        with pytest.raises(BrokenPipeError):
            writer.write(b"Content-Length: 2\r\n\r\n{}")
    assert len(gone) == 1 and "cannot write to the client" in gone[0]


def test_a_full_non_blocking_pipe_is_waited_on_and_every_byte_arrives() -> None:
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)  # as another process may leave it
    message = bytes(range(256)) * 1024  # 256 KB: several times a pipe's buffer
    received = bytearray()

    def read_later() -> None:
        threading.Event().wait(0.3)
        while len(received) < 2 * len(message):
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            received.extend(chunk)

    reader = threading.Thread(target=read_later, daemon=True)
    reader.start()
    gone: list[str] = []
    writer = ClientWriter(os.fdopen(write_end, "wb"), gone.append)
    assert writer.write(message) == len(message)
    writer.write(message)
    reader.join(20)
    writer.close()
    os.close(read_end)
    assert bytes(received) == message * 2 and not gone


def test_a_client_that_never_reads_is_gone_after_the_stall_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_stream, "STALL_S", 0.5)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETFL, fcntl.fcntl(write_end, fcntl.F_GETFL) | os.O_NONBLOCK)
    gone: list[str] = []
    writer = ClientWriter(os.fdopen(write_end, "wb"), gone.append)
    with pytest.raises(BrokenPipeError):
        writer.write(b"x" * (1 << 20))
    assert gone and "read nothing" in gone[0]
    os.close(read_end)


# -- the client's stream (MessageReader) as pygls's loop reads it ----------------------------------------


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class _RecordingStream:
    """A blocking stream over a pipe whose reads are counted."""

    def __init__(self, fd: int) -> None:
        self.file = os.fdopen(fd, "rb")
        self.reads = 0

    def readline(self) -> bytes:
        self.reads += 1
        return self.file.readline()

    def read(self, n: int) -> bytes:
        self.reads += 1
        return self.file.read(n)


def _run_pygls_loop(stream: Any, until: int, reader: type[MessageReader] = MessageReader) -> list[Any]:
    """pygls's own stdio loop over a MessageReader of ``stream``; the messages it handles, up to ``until``."""
    from pygls.io_ import run_async

    handled: list[Any] = []
    stop = threading.Event()

    class Protocol:
        def structure_message(self, data: dict[str, Any]) -> dict[str, Any]:
            return data

        def handle_message(self, message: Any) -> None:
            handled.append(message)
            if len(handled) >= until:
                stop.set()

    asyncio.run(run_async(stop, reader(stream), Protocol()))  # type: ignore[arg-type]
    return handled


def test_messages_cut_anywhere_reach_pygls_whole_and_in_order() -> None:
    read_end, write_end = os.pipe()
    bodies = [json.dumps({"jsonrpc": "2.0", "id": n, "text": "é" * n}).encode() for n in range(1, 6)]
    data = b"".join(_frame(body) for body in bodies[:4])
    data += b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + _frame(bodies[4])

    def write_in_pieces() -> None:
        for at in range(0, len(data), 7):  # cut inside headers, between them and inside bodies
            os.write(write_end, data[at : at + 7])
            threading.Event().wait(0.002)

    writer = threading.Thread(target=write_in_pieces)
    writer.start()
    handled = _run_pygls_loop(_RecordingStream(read_end), until=5)
    writer.join()
    os.close(write_end)
    assert [m["id"] for m in handled] == [1, 2, 3, 4, 5]
    assert handled[2]["text"] == "ééé"


def test_the_stream_is_read_only_when_pygls_asks_so_no_read_is_left_blocked_at_exit() -> None:
    """A daemon thread blocked inside stdin's read holds its lock, and the interpreter aborts at exit
    (``_enter_buffered_busy``): after the last message pygls wants, the reader must not read on."""
    read_end, write_end = os.pipe()
    stream = _RecordingStream(read_end)
    os.write(write_end, _frame(b'{"jsonrpc": "2.0", "method": "exit"}') + _frame(b'{"never": "read"}'))
    handled = _run_pygls_loop(stream, until=1)
    threading.Event().wait(0.2)
    assert [m["method"] for m in handled] == ["exit"]
    assert stream.reads == 3  # the header line, the blank line, the body: nothing of the next message
    os.close(write_end)


def test_the_end_of_the_stream_ends_pygls_loop_and_is_reported() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, _frame(b'{"jsonrpc": "2.0", "id": 1}') + b'Content-Length: 40\r\n\r\n{"cut')
    os.close(write_end)
    ended: list[bool] = []
    stream = client_stream.EofReader(os.fdopen(read_end, "rb"), lambda: ended.append(True))
    handled = _run_pygls_loop(stream, until=99)  # returns: pygls's loop stops at the stream's end
    assert [m["id"] for m in handled] == [1] and ended


def test_headers_that_never_end_reach_pygls_before_they_do() -> None:
    """Lines that are not LSP framing are handed on once they pass WAKE_BYTES, so pygls's loop skips
    them as it always did instead of the reader holding them all until a blank line."""
    read_end, write_end = os.pipe()
    junk = b"X-Junk: " + b"y" * 100 + b"\r\n"
    seen_junk = threading.Event()
    early: list[bool] = []

    class Watched(MessageReader):
        async def readline(self) -> bytes:
            line = await super().readline()
            if line.startswith(b"X-Junk"):
                seen_junk.set()
            return line

    def write() -> None:
        os.write(write_end, junk * (2 * client_stream.WAKE_BYTES // len(junk)))
        early.append(seen_junk.wait(10))
        os.write(write_end, b"\r\n" + _frame(b'{"id": 7}'))
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    handled = _run_pygls_loop(_RecordingStream(read_end), until=1, reader=Watched)
    writer.join()
    assert early == [True] and handled == [{"id": 7}]
