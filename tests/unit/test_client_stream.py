"""The LSP server's stdout (mnemo.lsp.client_stream.ClientWriter): a broken stream ends the connection once
instead of pygls's recursive error report through it; a full non-blocking pipe is waited on, not failed."""

from __future__ import annotations

import fcntl
import os
import threading

import pytest

from mnemo.lsp import client_stream
from mnemo.lsp.client_stream import ClientWriter

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
