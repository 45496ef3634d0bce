"""Child processes with wall time and peak RSS, and small file helpers shared by the system drivers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Timed:
    seconds: float
    peak_rss_mb: float
    rc: int
    stdout: str
    stderr: str

    def check(self, what: str) -> Timed:
        if self.rc != 0:
            tail = (self.stderr.strip() or self.stdout.strip())[-300:].replace("\n", " ")
            raise RuntimeError(f"{what} exited {self.rc}: {tail}")
        return self


def run_timed(
    cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 3600
) -> Timed:
    """Run ``cmd``; wall seconds and the peak RSS of it and its waited-for descendants (``wait4``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        killer = threading.Timer(timeout, lambda: _kill_group(proc.pid))
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        seconds = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Timed(
            seconds,
            usage.ru_maxrss / 1024,
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def result_line(timed: Timed, what: str) -> dict[str, Any]:
    """The ``RESULT {json}`` line a driver child prints."""
    for line in timed.stdout.splitlines():
        if line.startswith("RESULT "):
            data: dict[str, Any] = json.loads(line[7:])
            return data
    timed.check(what)
    raise RuntimeError(f"{what}: no RESULT line ({timed.stderr.strip()[-300:]})")


def dir_bytes(*paths: Path) -> int:
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return total


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path
