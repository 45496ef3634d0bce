"""Messages an editor library may send that pygls does not read as it should, over the real server's stdio
(raw JSON-RPC frames: pytest-lsp's client always sends params)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.lsp.conftest import make_workspace

ANSWER_WITHIN_S = 60.0


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Reader:
    """Reads framed messages from the server's stdout, with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.answers: dict[int, dict[str, Any]] = {}
        """Responses read while waiting for another (an error can come before an earlier request's)."""
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)

    def answer(self, msg_id: int) -> dict[str, Any]:
        """The response to ``msg_id`` (server notifications and requests on the way are skipped)."""
        deadline = time.monotonic() + ANSWER_WITHIN_S
        while msg_id not in self.answers:
            message = self._next(deadline)
            if "id" in message and "method" not in message:
                self.answers[message["id"]] = message
        return self.answers.pop(msg_id)

    def _next(self, deadline: float) -> dict[str, Any]:
        while True:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if sep:
                length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
                if len(rest) >= length:
                    self.buffer = rest[length:]
                    message: dict[str, Any] = json.loads(rest[:length])
                    return message
            left = deadline - time.monotonic()
            assert left > 0, "no answer from the server"
            if self.selector.select(left):
                chunk = os.read(self.fd, 65536)
                assert chunk, "the server closed its output"
                self.buffer += chunk


def test_a_request_without_params_or_with_params_pygls_cannot_read_is_answered(tmp_path: Path) -> None:
    """pygls dropped such a request after logging it: `mnemo/status` with no params key (JSON-RPC lets a
    request leave them out) and a hover at line -1 were never answered, and the client waited for good."""
    ws = make_workspace(tmp_path, "none")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ws,
    )
    try:
        assert proc.stdin is not None
        reader = Reader(proc)
        params = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {}}
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        proc.stdin.flush()
        assert "capabilities" in reader.answer(1)["result"]
        hover = {
            "textDocument": {"uri": (ws / "MEMORY.md").as_uri()},
            "position": {"line": -1, "character": 0},
        }
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "mnemo/status"}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": hover}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 4, "method": "mnemo/status", "params": {}}))
        proc.stdin.flush()
        assert "state" in reader.answer(2)["result"]
        assert reader.answer(3)["error"]["code"] in (-32602, -32603)
        assert "state" in reader.answer(4)["result"]  # and the server goes on answering
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 5, "method": "shutdown"}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.flush()
        assert proc.wait(ANSWER_WITHIN_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
