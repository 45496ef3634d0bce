"""``mnemo serve --daemon``: a detached process that holds a workspace's index for the command line.

Scripts that call ``mnemo search`` many times pay Python's start and the index's opening each time; a
daemon pays them once. ``mnemo serve --daemon`` starts ``python -m mnemo serve --daemon-child`` in a new
session (no terminal; stdin from /dev/null; its log appended to ``<index dir>/daemon.log``), waits until
it answers on the index-sharing socket, says so and exits. The child takes the writer lease
(:mod:`mnemo.memory.sharing`, role ``daemon``), syncs (the keyword side first, vectors on its embedding
thread), and answers ``mnemo search`` / ``get`` / ``status`` / ``index`` (a search syncs first: files
may have changed). It exits after ``--idle-minutes`` without a request once nothing is left to embed, on
SIGTERM, SIGINT or SIGHUP, or when an editor's server starts on the workspace and asks it to yield.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

START_WAIT_S = 120.0
"""How long ``mnemo serve --daemon`` waits for the child to answer (it imports and opens the index)."""
IDLE_CHECK_S = 1.0


def run(args: argparse.Namespace) -> int:
    root = args.workspace.resolve()
    idle_s = max(0.0, float(args.idle_minutes)) * 60.0
    if args.daemon_child:
        return serve_until_idle(root, idle_s)
    return start_detached(root, args.idle_minutes, args.verbose)


def _index_dir(root: Path) -> Path:
    from mnemo.services import build_read_only

    return build_read_only(root).path.parent


def _ping(index_dir: Path) -> dict[str, Any] | None:
    from mnemo.memory.writer_client import ask_writer

    got = ask_writer(index_dir, "ping", timeout_s=5.0)
    return dict(got) if isinstance(got, dict) else None


def start_detached(root: Path, idle_minutes: float, verbose: int = 0) -> int:
    """Start the daemon for ``root`` unless a server already holds its index; 0 once one answers."""
    index_dir = _index_dir(root)
    running = _ping(index_dir)
    if running is not None:
        print(f"mnemo: {root} is already served by the {running['role']} (pid {running['pid']})")
        return 0
    index_dir.mkdir(parents=True, exist_ok=True)
    log_path = index_dir / "daemon.log"
    command = [sys.executable, "-m", "mnemo", "serve", "--daemon-child", "-w", str(root)]
    command += ["--idle-minutes", repr(float(idle_minutes)), "-" + "v" * max(1, verbose)]
    with log_path.open("ab") as log_file:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,  # no terminal: Ctrl-C and the shell's exit do not reach it
        )
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        code = child.poll()
        if code is not None:
            print(f"mnemo: the daemon exited at start (code {code}); see {log_path}", file=sys.stderr)
            return 1
        answered = _ping(index_dir)
        if answered is not None:
            if answered["pid"] != child.pid:  # another server took the index first; the child exits
                print(f"mnemo: {root} is already served by the {answered['role']} (pid {answered['pid']})")
                return 0
            print(
                f"mnemo: serving {root} (pid {child.pid}; exits after {idle_minutes:g} idle minutes; "
                f"log {log_path})"
            )
            return 0
        time.sleep(0.1)
    print(f"mnemo: the daemon did not answer within {START_WAIT_S:.0f} s; see {log_path}", file=sys.stderr)
    return 1


def serve_until_idle(root: Path, idle_s: float) -> int:
    """The daemon itself: hold the index and answer until idle, signalled or asked to yield."""
    from mnemo.errors import MnemoError
    from mnemo.server_malloc import tune_for_server
    from mnemo.services import build_services

    tune_for_server()  # before the daemon's threads allocate
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    services = build_services(root)
    for problem in services.problems:
        log.warning("%s", problem)
    shared = services.share_index("daemon")
    try:
        if not shared.start():
            holder = shared.holder() or {}
            log.warning(
                "%s is served by the %s (pid %s); exiting", root, holder.get("role"), holder.get("pid")
            )
            return 0
        log.info("serving %s; exits after %.0f s without a request", root, idle_s)
        from mnemo.embeddings import prepare

        prepare(shared.memory.embedder)  # the model before the index: its one-time peak while small
        try:
            shared.sync_if_writer()  # the keyword side first; the vectors follow on the embedding thread
        except MnemoError as exc:
            log.warning("index sync failed: %s", exc)
        while not stop.wait(IDLE_CHECK_S):
            if not shared.is_writer:
                log.info("an editor's server took over the index; exiting")
                break
            idle = time.monotonic() - shared.last_request
            if idle >= idle_s and not shared.memory.vectors.busy():
                log.info("idle for %.0f s; exiting", idle)
                break
    finally:
        services.close()
    return 0
