"""Supervising a started command: its output read up to a cap, a wall-clock deadline, and its whole
process group killed at the end (:func:`mnemo.policy.sandbox.run_sandboxed` starts it in bubblewrap with
:func:`rlimits` applied before ``exec``)."""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed command did: its exit code, its (capped) output, and how it ended."""

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool
    """Output went past ``max_output`` bytes (per stream): it was cut and the command stopped."""
    timed_out: bool
    killed: bool
    """The process group had to be killed (timeout, or it was still alive at the end)."""
    duration_s: float


def rlimits(cpu_s: int, mem_bytes: int, fsize_bytes: int, nofile: int) -> Callable[[], None]:
    """A ``preexec_fn`` that sets the command's rlimits (CPU seconds, address space, file size, open files)."""

    def apply() -> None:
        for which, value in (
            (resource.RLIMIT_CPU, cpu_s),
            (resource.RLIMIT_AS, mem_bytes),
            (resource.RLIMIT_FSIZE, fsize_bytes),
            (resource.RLIMIT_NOFILE, nofile),
        ):
            resource.setrlimit(which, (value, value))

    return apply


def kill_group(pgid: int, proc: subprocess.Popen[bytes], grace_s: float = 0.5) -> bool:
    """SIGTERM the group, then SIGKILL what is left; True when something had to be signalled."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return True


def _drain(sel: selectors.BaseSelector, until: float) -> None:
    """Read and discard until every writer of the pipes is gone (bounded)."""
    while sel.get_map() and time.monotonic() < until:
        for key, _ in sel.select(timeout=0.1):
            if not os.read(key.fd, 65536):
                sel.unregister(key.fileobj)
    sel.close()


def supervise(
    proc: subprocess.Popen[bytes], start: float, timeout_s: float, max_output: int
) -> SandboxResult:
    """Read the capped output until exit or deadline, then make sure the process group is gone."""
    pgid = proc.pid
    buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = timed_out = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    deadline = start + timeout_s
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = buffers[key.data]
            room = max_output - len(buf)
            if len(chunk) > room:
                truncated = True
            buf += chunk[: max(room, 0)]
        if truncated:
            break
    killed = False
    if timed_out or truncated:
        killed = kill_group(pgid, proc)
    try:
        exit_code = proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        timed_out = True
        killed = kill_group(pgid, proc) or killed
        exit_code = proc.wait()
    killed = kill_group(pgid, proc, grace_s=0.1) or killed  # stragglers that kept the group alive
    _drain(sel, until=time.monotonic() + 5.0)  # EOF: the PID namespace is torn down, its processes gone
    proc.stdout.close()
    proc.stderr.close()
    return SandboxResult(
        exit_code=exit_code,
        stdout=buffers["stdout"].decode("utf-8", errors="replace"),
        stderr=buffers["stderr"].decode("utf-8", errors="replace"),
        truncated=truncated,
        timed_out=timed_out,
        killed=killed,
        duration_s=time.monotonic() - start,
    )
