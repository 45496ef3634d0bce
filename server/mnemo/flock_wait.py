"""An exclusive ``flock`` taken within a deadline: a process that keeps a lock past it is reported by
the caller, never waited on forever. Locks are per open file, so two threads of one process that each
open the file exclude each other too."""

from __future__ import annotations

import fcntl
import time

POLL_S = 0.02


def take_exclusive(fd: int, timeout_s: float) -> bool:
    """Lock ``fd`` exclusively, trying until ``timeout_s`` has passed; False when another holder kept it.
    The lock goes with the file's closing."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
