"""No orphans: `mnemo serve` ends when its editor goes, even while a worker thread is stuck in a long job.

The report: a `mnemo serve` outlived its Neovim, reparented to PID 1, at ~75% CPU for minutes. Here the
long job is an embedding request to a local endpoint that accepts the connection and never answers
(``embedding.timeout_s = 600``), so indexing holds a worker thread, as a slow model would, for as long as
the test could wait. Each test asserts, within a bounded wait, that no mnemo process is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

EXIT_WITHIN_S = 15.0  # lifeline poll (0.5 s) + clean-up grace (3 s), with room for a loaded machine

EDITOR = """
import subprocess, sys
serve = subprocess.Popen(
    [sys.executable, "-m", "mnemo", "serve"],
    stdin=int(sys.argv[1]), stdout=subprocess.DEVNULL, stderr=open(sys.argv[2], "wb"), pass_fds=(int(sys.argv[1]),),
)
print(serve.pid, flush=True)
serve.wait()
"""


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def handshake(ws: Path, process_id: int | None) -> bytes:
    params = {"processId": process_id, "rootUri": ws.as_uri(), "capabilities": {}}
    return frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) + frame(
        {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    )


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (an exited orphan may wait for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group, from /proc (no psutil)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                found.append(int(entry))
    return found


def wait_gone(pids: list[int], seconds: float = EXIT_WITHIN_S) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


@pytest.fixture
def stalled(tmp_path: Path) -> Iterator[tuple[Path, socket.socket]]:
    """A workspace whose embedding endpoint takes the request and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(60)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Memory\n\n- The billing service uses PostgreSQL.\n", encoding="utf-8")
    (ws / "mnemo.toml").write_text(
        '[embedding]\nprovider = "openai"\n'
        f'endpoint = "http://127.0.0.1:{listener.getsockname()[1]}/v1"\n'
        "timeout_s = 600.0\nmax_retries = 0\n",
        encoding="utf-8",
    )
    yield ws, listener
    listener.close()


def busy(listener: socket.socket) -> socket.socket:
    """Wait until the server's worker thread is inside the embedding request; keep it stuck there."""
    conn, _ = listener.accept()
    return conn


def test_serve_exits_when_its_editor_is_killed(stalled: tuple[Path, socket.socket], tmp_path: Path) -> None:
    """An editor crash: SIGKILL the parent. stdin stays open (the test holds it), so only the parent watch
    can notice; indexing is stuck in a worker thread all along."""
    ws, listener = stalled
    read_end, write_end = os.pipe()
    editor = subprocess.Popen(
        [sys.executable, "-c", EDITOR, str(read_end), str(tmp_path / "serve.log")],
        stdout=subprocess.PIPE,
        pass_fds=(read_end,),
        start_new_session=True,  # its own process group, so everything it started can be found
    )
    os.close(read_end)
    conn = None
    try:
        assert editor.stdout is not None
        serve_pid = int(editor.stdout.readline())
        os.write(write_end, handshake(ws, None))
        conn = busy(listener)
        assert alive(serve_pid)
        os.kill(editor.pid, signal.SIGKILL)
        editor.wait(10)
        assert wait_gone([serve_pid]) == [], (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
        assert group_members(editor.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(editor.pid, signal.SIGKILL)
        os.close(write_end)
        if conn is not None:
            conn.close()


@contextlib.contextmanager
def _serving(
    tmp_path: Path, ws: Path, listener: socket.socket, client_pid: int
) -> Iterator[subprocess.Popen[bytes]]:
    """`mnemo serve` initialized for ``client_pid``, its indexing stuck in the long job; killed after."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "mnemo", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "serve.log").open("wb"),
        start_new_session=True,
    )
    conn = None
    try:
        assert serve.stdin is not None
        serve.stdin.write(handshake(ws, client_pid))
        serve.stdin.flush()
        conn = busy(listener)
        yield serve
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
        if conn is not None:
            conn.close()
        if serve.stdin is not None:
            serve.stdin.close()


def test_serve_exits_when_stdin_closes_during_a_long_job(
    stalled: tuple[Path, socket.socket], tmp_path: Path
) -> None:
    ws, listener = stalled
    with _serving(tmp_path, ws, listener, os.getpid()) as serve:
        assert serve.stdin is not None
        started = time.monotonic()
        serve.stdin.close()  # the editor closed the pipe (or quit without shutdown/exit)
        serve.wait(EXIT_WITHIN_S)
        assert time.monotonic() - started < EXIT_WITHIN_S
        assert group_members(serve.pid) == []


def test_serve_exits_on_shutdown_and_exit_during_a_long_job(
    stalled: tuple[Path, socket.socket], tmp_path: Path
) -> None:
    ws, listener = stalled
    with _serving(tmp_path, ws, listener, os.getpid()) as serve:
        assert serve.stdin is not None
        serve.stdin.write(
            frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            + frame({"jsonrpc": "2.0", "method": "exit"})
        )
        serve.stdin.flush()  # stdin stays open: the exit notification alone must end the process
        assert serve.wait(EXIT_WITHIN_S) == 0


def test_serve_exits_when_the_client_process_named_in_initialize_dies(
    stalled: tuple[Path, socket.socket], tmp_path: Path
) -> None:
    """A client that is not the direct parent (started through a wrapper): its processId is watched."""
    ws, listener = stalled
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with _serving(tmp_path, ws, listener, client.pid) as serve:
            client.kill()
            client.wait(10)
            serve.wait(EXIT_WITHIN_S)
    finally:
        client.kill()
