"""No orphans: a long-running mnemo process notices that whoever started it has gone, and ends.

An editor that crashes or is killed never sends ``shutdown``/``exit``; its ``mnemo serve`` is reparented
(to PID 1 or a subreaper) and, with an indexing or embedding job on a worker thread, would keep a core
busy for minutes. :class:`Lifeline` polls, on one daemon thread, for:

- the parent process changing (``os.getppid()``: the parent died and the process was reparented);
- the client process named in LSP ``initialize`` (``processId``) no longer existing — watched only when
  it existed when first named, so a PID from another PID namespace never ends a healthy server;
- hang-up on stdin when it is a pipe or socket (``poll`` with no events asked, which reports POLLHUP
  without reading, so nothing is taken from a stream another reader owns).

``PR_SET_PDEATHSIG`` is deliberately not used: the kernel sends it when the *thread* that forked the
child exits, so a client that starts mnemo from a short-lived thread would kill a healthy server.

:func:`exit_soon` is the other half: worker threads cannot be interrupted, and the interpreter waits for
them at exit, so after a clean-up with a deadline the process ends with ``os._exit``. Memory files are
never written by indexing and each index write is one transaction, so cutting a job is safe.
"""

from __future__ import annotations

import logging
import os
import select
import stat
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How often the lifeline looks (a few syscalls; no measurable CPU)."""
EXIT_GRACE_S = 3.0
"""How long clean-up may take once the client is gone before the process is ended regardless."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _is_stream(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Lifeline:
    """Calls ``on_gone(reason)`` once, from its own thread, when the process's client has gone."""

    def __init__(
        self, on_gone: Callable[[str], None], *, every_s: float = POLL_S, parent: int | None = -1
    ) -> None:
        """``parent``: the parent PID to watch (-1: the current one; None: do not watch the parent)."""
        self.on_gone = on_gone
        self.every_s = every_s
        self.parent = os.getppid() if parent == -1 else parent
        self.client_pid: int | None = None
        self._poll: select.poll | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch_client(self, pid: object) -> None:
        """Also end when this process (the editor, from LSP ``initialize``) is gone."""
        if isinstance(pid, int) and not isinstance(pid, bool) and 1 < pid != os.getpid() and _alive(pid):
            self.client_pid = pid

    def watch_stdin_hangup(self, fd: int | None = None) -> bool:
        """Also end when stdin, a pipe or socket, is closed by every writer. False when it is not one."""
        fd = sys.stdin.fileno() if fd is None else fd
        if not _is_stream(fd):
            return False
        poll = select.poll()
        poll.register(fd, 0)  # POLLHUP and POLLERR are always reported; nothing is read
        if poll.poll(0):  # closed before we started (`true | mnemo gateway`): never a live client
            return False
        self._poll = poll
        return True

    def start(self) -> Lifeline:
        self._thread = threading.Thread(target=self._run, name="mnemo-lifeline", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def gone_reason(self) -> str | None:
        if self.parent is not None and os.getppid() != self.parent:
            return f"parent process {self.parent} is gone"
        if self.client_pid is not None and not _alive(self.client_pid):
            return f"client process {self.client_pid} is gone"
        if self._poll is not None:
            for _fd, events in self._poll.poll(0):
                if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    return "stdin was closed"
        return None

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            reason = self.gone_reason()
            if reason is not None:
                self.on_gone(reason)
                return


def exit_soon(clean_up: Callable[[], None], code: int = 0, grace_s: float = EXIT_GRACE_S) -> None:
    """Run ``clean_up`` on a daemon thread, wait at most ``grace_s``, then end the process with ``code``."""

    def run() -> None:
        worker = threading.Thread(target=_quietly, args=(clean_up,), name="mnemo-clean-up", daemon=True)
        worker.start()
        worker.join(grace_s)
        if worker.is_alive():
            log.warning("clean-up did not finish in %.0f s; exiting anyway", grace_s)
        _flush_logs()
        os._exit(code)

    threading.Thread(target=run, name="mnemo-exit", daemon=True).start()


def exit_by(seconds: float, code: int = 0) -> None:
    """End the process ``seconds`` from now if it is still running (a worker thread would hold it)."""

    def run() -> None:
        time.sleep(seconds)
        log.warning("still running %.0f s after being asked to stop; exiting", seconds)
        _flush_logs()
        os._exit(code)

    threading.Thread(target=run, name="mnemo-exit-by", daemon=True).start()


FLUSH_GRACE_S = 1.0
"""How long the last log lines may take to go out before the process ends anyway."""


def _flush_logs() -> None:
    """Flush the log handlers, on a daemon thread waited for at most :data:`FLUSH_GRACE_S`: a stderr
    pipe nobody reads (a client that never drains it) would block the flush, and the exit, forever."""

    def flush() -> None:
        for handler in logging.getLogger().handlers + logging.getLogger("mnemo").handlers:
            _quietly(handler.flush)

    flusher = threading.Thread(target=flush, name="mnemo-flush-logs", daemon=True)
    flusher.start()
    flusher.join(FLUSH_GRACE_S)


def _quietly(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # exiting: a failed clean-up must not keep the process alive
        log.debug("clean-up failed", exc_info=True)
