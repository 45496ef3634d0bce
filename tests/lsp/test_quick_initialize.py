"""``mnemo serve`` answers ``initialize`` from a record before pygls loads (mnemo/lsp/quick_start.py), and
then behaves exactly as when pygls answered: one answer per request, the same capabilities, the request
handled (a later request is answered), and an out-of-date record is replaced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mnemo.lsp.quick_start import frame


def read_message(stream: Any) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        assert line, "the server closed its output"
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    message: dict[str, Any] = json.loads(stream.read(length))
    return message


def session(ws: Path, cache: Path) -> list[dict[str, Any]]:
    """initialize, initialized, shutdown, exit; every message the server sent that answers a request."""
    env = {**os.environ, "MNEMO_CACHE_DIR": str(cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "serve", "--workspace", str(ws)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    params = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {"window": {}}}
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
    proc.stdin.flush()
    answers = []
    first = read_message(proc.stdout)
    answers.append(first)
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    proc.stdin.flush()
    while True:
        message = read_message(proc.stdout)
        if "id" in message and "method" not in message:
            answers.append(message)
            if message["id"] == 2:
                break
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    proc.stdin.close()
    answers += [m for m in _rest(proc.stdout) if "id" in m and "method" not in m]
    assert proc.wait(timeout=60) == 0
    return answers


def _rest(stream: Any) -> list[dict[str, Any]]:
    out = []
    while True:
        try:
            out.append(read_message(stream))
        except AssertionError:
            return out


def test_a_recorded_answer_is_the_one_pygls_gives_and_is_sent_once(tmp_path: Path) -> None:
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n", encoding="utf-8")
    cold = session(ws, cache)
    records = list((cache / "lsp").glob("*.json"))
    assert len(records) == 1  # the first start recorded pygls's answer
    warm = session(ws, cache)
    assert [m["id"] for m in cold] == [m["id"] for m in warm] == [1, 2]  # one answer each, no duplicate
    assert warm[0]["result"] == cold[0]["result"]
    assert warm[0]["result"]["serverInfo"]["name"] == "mnemo"
    assert "result" in warm[1]  # shutdown answered: the replayed initialize was handled by pygls

    stale = dict(cold[0]["result"], capabilities={})
    records[0].write_text(json.dumps(stale), encoding="utf-8")
    sent = session(ws, cache)
    assert sent[0]["result"] == stale  # this session got the record as it was ...
    assert json.loads(records[0].read_text(encoding="utf-8")) == cold[0]["result"]  # ... and it was mended
