"""exit_soon ends the process even when its stderr is a pipe nobody reads (the last log flush blocks)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.timeout(60)

CHILD = textwrap.dedent(
    """
    import logging, sys, threading, time
    from mnemo.lifeline import exit_soon

    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    log = logging.getLogger("mnemo.test")

    def flood():  # blocks once the pipe is full, holding the handler's lock
        while True:
            log.info("x" * 4000)

    threading.Thread(target=flood, daemon=True).start()
    time.sleep(1.0)
    print("exiting", flush=True)
    exit_soon(lambda: None, code=7, grace_s=1.0)
    time.sleep(120)
    """
)


def test_exit_soon_ends_the_process_though_stderr_is_never_read() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "exiting"
        started = time.monotonic()
        code = proc.wait(timeout=30)  # (stderr deliberately unread)
        assert code == 7 and time.monotonic() - started < 20
    finally:
        proc.kill()
        proc.wait()
