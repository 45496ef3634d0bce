"""Reads in the background the postings a pruned keyword search did without, so the next search with
those words scores them from memory.

A query whose words the process does not hold is answered by the pruned top-k
(:func:`mnemo.index.pg_topk.top_k`), which reads only the heads of the words' lists: cheaper than
reading every posting once, dearer each time it repeats (at 100,000 notes a ``kubectl rollout status
...`` query cost 13-18 ms of client CPU and 30-55 ms pruned, 6-9 ms and 10-15 ms scanned from held
postings; reading its words' ~600,000 postings took ~0.6 s once). So the search answers pruned, and
asks :class:`PostingsPrefetch` to read the words' postings into the process's
:class:`mnemo.index.pg_memos.PostingsMemo` on a thread of its own, in a snapshot of its own, at the
version that snapshot sees: the next search at that version finds them held
(:func:`mnemo.index.pg_terms._few_missing`) and scans. A write moves the version on, and the next
pruned search asks again.

One thread reads, one ask at a time, on a connection of its own (a reader pool of its own); asks beyond :data:`QUEUED_MOST`
waiting are dropped (the search that made them was answered anyway), as are asks for stems already
waiting. :meth:`PostingsPrefetch.close` cancels the read under way (a one-shot ``mnemo search`` must not
wait for it to exit) and stops the thread; a later ask starts another.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable

import psycopg

from mnemo.errors import IndexUnavailable
from mnemo.index import pg_terms
from mnemo.index.pg_connect import ReaderPool
from mnemo.index.pg_memos import PostingsMemo

log = logging.getLogger(__name__)

QUEUED_MOST = 8
"""Asks waiting at most; more are dropped."""

Ask = tuple[int, tuple[str, ...]]
"""(generation, stems) whose postings to hold."""

CANCEL_AGAIN_S = 0.1
"""How often :meth:`PostingsPrefetch.close` cancels again while the thread has not ended."""


class PostingsPrefetch:
    """Holds pruned searches' postings in ``memo``, read on a thread that has a reader pool of its own
    (``open_pool``), each ask in one of its snapshots: cancelling that pool's connection can never hit
    another search's query."""

    def __init__(self, open_pool: Callable[[], ReaderPool], memo: PostingsMemo) -> None:
        self._open_pool = open_pool
        self._memo = memo
        self._lock = threading.Lock()
        self._waiting: set[Ask] = set()
        self._asks: queue.Queue[Ask | None] = queue.Queue()
        """The running thread's asks (each thread has its own: a closed one may still be reading)."""
        self._thread: threading.Thread | None = None
        self._reading: dict[threading.Thread, psycopg.Connection] = {}
        """Each thread's connection while it reads (a closed thread may still be reading)."""
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        """Asks taken and not yet done, waiting ones included."""

    def want(self, generation: int, stems: tuple[str, ...]) -> None:
        """Ask for ``stems``' postings in ``generation`` to be held (a search pruned without them)."""
        ask = (generation, stems)
        with self._lock:
            if ask in self._waiting or len(self._waiting) >= QUEUED_MOST:
                return
            self._waiting.add(ask)
            self._busy += 1
            if self._thread is None:
                self._asks = queue.Queue()
                self._thread = threading.Thread(
                    target=self._run, args=(self._asks,), name="mnemo-postings-prefetch", daemon=True
                )
                self._thread.start()
            self._asks.put(ask)

    def _run(self, asks: queue.Queue[Ask | None]) -> None:
        pool = self._open_pool()
        try:
            while (ask := asks.get()) is not None:
                try:
                    with pool.snapshot() as con:
                        self._hold(con, ask)
                except (psycopg.Error, OSError, IndexUnavailable) as err:  # the next search asks again
                    log.debug("reading postings ahead failed: %s", err)
                except Exception:  # a bug must not stop the thread: later asks would wait for nothing
                    log.warning("reading postings ahead failed", exc_info=True)
                finally:
                    with self._lock:
                        self._waiting.discard(ask)
                        self._busy -= 1
                        self._idle.notify_all()
        finally:
            pool.close()

    def _hold(self, con: psycopg.Connection, ask: Ask) -> None:
        me = threading.current_thread()
        with self._lock:
            self._reading[me] = con
        try:
            pg_terms.hold_postings(con, ask[0], ask[1], self._memo)
        finally:
            with self._lock:
                del self._reading[me]

    def wait_idle(self, timeout: float) -> bool:
        """Whether every ask made so far was done within ``timeout`` seconds (tests, benchmarks)."""
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Cancel the read under way, drop the waiting asks and stop the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            with contextlib.suppress(queue.Empty):
                while True:
                    dropped = self._asks.get_nowait()
                    if dropped is not None:
                        self._waiting.discard(dropped)
                        self._busy -= 1
            self._asks.put(None)
            self._idle.notify_all()
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            # Again until the thread ends: a cancel that comes before its query reaches the server
            # cancels nothing (the thread's own pool's connection: no other search's query is hit).
            with self._lock:
                con = self._reading.get(thread)
            if con is not None:
                with contextlib.suppress(psycopg.Error):
                    con.cancel_safe(timeout=max(0.1, deadline - time.monotonic()))
            thread.join(min(CANCEL_AGAIN_S, max(0.0, deadline - time.monotonic())))
