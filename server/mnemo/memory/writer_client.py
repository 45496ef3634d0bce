"""The index writer's client side: find the process that holds a workspace's index and ask it.

The command line's first step (`mnemo search`, `get`, `status`, `index`) and the followers of
:mod:`mnemo.memory.sharing` use it. It imports nothing but the standard library and mnemo's errors, so a
command answered by a running server (the editor's, the gateway's, ``mnemo serve --daemon``) loads no
DuckDB, NumPy or index code at all.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from mnemo.errors import IndexUnavailable, MnemoError

log = logging.getLogger(__name__)

LOCK_FILE = "writer.lock"
INFO_FILE = "writer.json"
MAX_LINE = 4_000_000


def socket_path_for(index_dir: Path) -> Path:
    """``<index dir>/memory.sock``, or a per-user temp path when that is too long for a Unix socket."""
    path = index_dir / "memory.sock"
    if len(str(path)) < 100:
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(str(index_dir).encode()).hexdigest()[:16]
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"mnemo-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    return base / f"{digest}.sock"


def call(path: Path, request: dict[str, Any], timeout_s: float = 120.0) -> Any:
    """One request over the writer's socket and its result (an error reply raises MnemoError)."""
    import socket  # (with no writer running, a one-shot command never needs it)

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


def writer_record(index_dir: Path) -> dict[str, Any] | None:
    """What the last writer of ``index_dir`` recorded (pid, role, socket); it may have exited since."""
    try:
        return dict(json.loads((index_dir / INFO_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def ask_writer(
    index_dir: Path, op: str, args: dict[str, Any] | None = None, *, timeout_s: float = 120.0
) -> Any | None:
    """The running index writer's answer to ``op`` (its errors raise MnemoError); None when no writer
    runs: no record, or a socket nobody listens on any more (a writer that was killed)."""
    record = writer_record(index_dir)
    if record is None or "socket" not in record:
        return None
    socket_path = Path(record["socket"])
    if not socket_path.exists():  # its writer has exited (one that was killed leaves the file)
        return None
    try:
        return call(socket_path, {"op": op, "args": args or {}}, timeout_s=timeout_s)
    except TimeoutError as exc:
        raise IndexUnavailable(
            f"the index writer (pid {record.get('pid')}, {record.get('role')}) did not answer in "
            f"{timeout_s:.0f} s"
        ) from exc
    except (OSError, ValueError) as exc:  # refused or gone (killed), closing, or handing over
        log.info("the index writer did not answer %s: %s", op, exc)
        return None
