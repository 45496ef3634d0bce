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
from mnemo.lsp.shipped_answer import shipped_answer

WINDOW_ONLY: dict[str, Any] = {"window": {}}
VSCODE: dict[str, Any] = {  # the parts of VS Code's capabilities that pygls's answer reads
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {
        "synchronization": {
            "dynamicRegistration": True,
            "willSave": True,
            "willSaveWaitUntil": True,
            "didSave": True,
        }
    },
    "workspace": {"workspaceFolders": True, "configuration": True, "applyEdit": True},
    "window": {"workDoneProgress": True},
}
NEOVIM: dict[str, Any] = {
    "general": {"positionEncodings": ["utf-8", "utf-16", "utf-32"]},
    "textDocument": {
        "synchronization": {
            "dynamicRegistration": False,
            "willSave": True,
            "willSaveWaitUntil": True,
            "didSave": True,
        }
    },
    "workspace": {"workspaceFolders": True, "applyEdit": True},
    "window": {"workDoneProgress": True, "showMessage": {}},
}


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


def session(ws: Path, cache: Path, capabilities: dict[str, Any] | None = None) -> list[dict[str, Any]]:
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
    caps = WINDOW_ONLY if capabilities is None else capabilities
    params = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": caps}
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
    assert cold[0]["result"] == shipped_answer()  # no record yet: the shipped answer, at once
    records = list((cache / "lsp").glob("*.json"))
    assert len(records) == 1  # the first start recorded pygls's answer for this client
    pygls_answer = json.loads(records[0].read_text(encoding="utf-8"))
    warm = session(ws, cache)
    assert [m["id"] for m in cold] == [m["id"] for m in warm] == [1, 2]  # one answer each, no duplicate
    assert warm[0]["result"] == pygls_answer
    assert warm[0]["result"]["serverInfo"]["name"] == "mnemo"
    assert "result" in warm[1]  # shutdown answered: the replayed initialize was handled by pygls

    stale = dict(pygls_answer, capabilities={})
    records[0].write_text(json.dumps(stale), encoding="utf-8")
    sent = session(ws, cache)
    assert sent[0]["result"] == stale  # this session got the record as it was ...
    assert json.loads(records[0].read_text(encoding="utf-8")) == pygls_answer  # ... and it was mended


def _without_false_flags(answer: dict[str, Any]) -> dict[str, Any]:
    sync = {k: v for k, v in answer["capabilities"]["textDocumentSync"].items() if v is not False}
    return {**answer, "capabilities": {**answer["capabilities"], "textDocumentSync": sync}}


def test_the_shipped_answer_is_what_pygls_answers_an_editor(tmp_path: Path) -> None:
    # A feature registered or dropped without changing mnemo/lsp/shipped_answer.py fails here.
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, caps in (("vscode", VSCODE), ("neovim", NEOVIM), ("window-only", WINDOW_ONLY)):
        cache = tmp_path / f"cache-{name}"
        session(ws, cache, caps)
        (record,) = (cache / "lsp").glob("*.json")
        pygls_answer = json.loads(record.read_text(encoding="utf-8"))
        if caps is WINDOW_ONLY:  # the two willSave flags absent instead of false: the same meaning
            assert pygls_answer == _without_false_flags(shipped_answer()), name
        else:
            assert pygls_answer == shipped_answer(), name
