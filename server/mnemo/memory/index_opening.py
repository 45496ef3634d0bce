"""Opening the index for this process, and handing it to another one (:mod:`mnemo.memory.sharing`).

The index file has one writer process at a time. A gateway or a daemon that yields it to an editor's
server closes it (:meth:`IndexOpening.release`); from then on nothing in this process opens it again
(a sync or a search already on its way gets IndexUnavailable and, through the shared memory, asks the
new writer) until the process takes the writer lease back (:meth:`IndexOpening.reclaim`). Before, a
sync that was loading the model when the editor asked opened the file again as a follower, and the
editor could not index until the gateway exited.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from mnemo.errors import IndexUnavailable
from mnemo.index.engine import IndexEngine
from mnemo.memory.status import IndexState

STARTUP_WAIT_S = 30.0
"""How long a search at start-up waits for an existing index to open (not for a first build)."""


class IndexOpening:
    def __init__(
        self,
        indexer: IndexEngine,
        write_lock: threading.RLock,
        index_state: IndexState,
        flush_retrievals: Callable[[float], object],
    ) -> None:
        self.indexer = indexer
        self._write_lock = write_lock
        self._index_state = index_state
        self._flush_retrievals = flush_retrievals
        self._released = False

    def open(self) -> None:
        """Open the index (the write lock held), unless this process handed it to another one."""
        self.refuse_if_released()
        self.indexer.open()

    def refuse_if_released(self) -> None:
        if self._released:
            raise IndexUnavailable("this process handed the index to another mnemo process, its writer now")

    def ensure_open(self) -> None:
        """Open an existing compatible index; while a sync holds the writer, wait for it to open one."""
        if self.indexer.store is not None:
            return
        if self._write_lock.acquire(blocking=False):
            try:
                if self.indexer.store is None:
                    self.open()
            finally:
                self._write_lock.release()
        else:  # a sync is running: it opens the existing index first, or builds one
            self.indexer.opened.wait(STARTUP_WAIT_S)

    def release(self) -> None:
        """Close the index file so another process can write it; nothing here reopens it until
        :meth:`reclaim`."""
        self._flush_retrievals(5.0)
        with self._write_lock:
            self._released = True
            self.indexer.close()
            self.indexer.opened.clear()
            self._index_state.state = "released"

    def reclaim(self) -> None:
        """This process is the index's writer again (it took the lease): the next call reopens it."""
        with self._write_lock:
            self._released = False
