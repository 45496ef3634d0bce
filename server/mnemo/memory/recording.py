"""Retrieval statistics on their way into the index: every recorded search's results are queued and
written by the index writer shortly after (a search never waits for the write), and carried over a
rebuild. Hovers and code lenses read them (``recalled N times``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from mnemo.index.duckdb_native import duckdb
from mnemo.index.engine import IndexEngine
from mnemo.index.store import ChunkStore
from mnemo.memory.retrievals import RetrievalLog
from mnemo.search.results import SearchOutcome

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

FLUSH_DELAY_S = 0.5
"""Search results are written to the retrievals table this long after a search, off its path."""


class RetrievalRecorder:
    """Queues recorded searches and writes them under the writer lock, on a timer or when asked."""

    def __init__(
        self,
        indexer: IndexEngine,
        write_lock: threading.RLock,
        recovering: Callable[[Callable[[], bool]], bool],
        changed: Callable[[], int],
    ) -> None:
        self.indexer = indexer
        self.write_lock = write_lock
        self.recovering = recovering
        """The service's repair-and-retry wrapper for calls that touch the database."""
        self.changed = changed
        """Bumps the service's index generation (caches of hovers and lenses key on it)."""
        self.log = RetrievalLog()
        """Search results waiting for the writer (recorded in the index's ``retrievals`` table)."""
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False

    def record(self, outcome: SearchOutcome) -> None:
        """Queue the results; a timer writes them shortly after."""
        self.log.queue(outcome)
        self._start_timer()

    def _start_timer(self) -> None:
        with self._lock:
            if self._timer is None and not self._closed:
                self._timer = threading.Timer(FLUSH_DELAY_S, self._flush_later)
                self._timer.daemon = True
                self._timer.start()

    def flush(self, timeout_s: float = 1.0) -> bool:
        """Write queued statistics now; False when the writer stayed busy past ``timeout_s``."""
        return self.recovering(lambda: self._flush(timeout_s))

    def _flush(self, timeout_s: float) -> bool:
        if not self.log.pending():
            return True
        if not self.write_lock.acquire(timeout=timeout_s):
            return False
        try:
            self.log.flush(self.indexer.store)
            self.changed()
        finally:
            self.write_lock.release()
        return True

    def _flush_later(self) -> None:
        with self._lock:
            self._timer = None
        if not self.flush(timeout_s=0):  # the writer is busy: try again a little later
            self._start_timer()

    def saved(self, full: bool) -> pa.Table | None:
        """Statistics to carry into a rebuilt index (read only when a rebuild may happen)."""
        store = self.indexer.store
        if store is not None:
            return store.retrieval_table() if full else None
        return ChunkStore.read_retrieval_table(self.indexer.path)

    def restore(self, saved: pa.Table | None) -> None:
        if saved is None or self.indexer.store is None:
            return
        try:
            self.indexer.store.restore_retrievals(saved)
        except duckdb.Error as exc:  # an older layout: statistics are history, not worth failing for
            log.warning("retrieval statistics were not carried over the rebuild: %s", exc)

    def close(self) -> None:
        """No more timers (queued statistics are written by the last :meth:`flush`)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
