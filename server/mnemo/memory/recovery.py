"""Surviving DuckDB internal errors: a call that fails because DuckDB invalidated the database under
it (such as "Failed to add to the HNSW index: Duplicate keys") repairs the index and runs once more; a
second failure is answered with a clear error. The process never dies of it (docs/architecture.md,
"Crash damage")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from mnemo.errors import IndexUnavailable
from mnemo.index.engine import IndexEngine
from mnemo.index.repair import BROKEN_DATABASE

log = logging.getLogger(__name__)

T = TypeVar("T")


class Recovery:
    """Runs calls on the index; one repair for all the calls that failed on the same database."""

    def __init__(
        self, indexer: IndexEngine, write_lock: threading.RLock, repaired: Callable[[], None]
    ) -> None:
        self.indexer = indexer
        self.write_lock = write_lock
        self.repaired = repaired
        """Called under the writer lock after a repair (the index changed; lost edits are queued again)."""
        self.count = 0
        """Repairs so far."""

    def run(self, call: Callable[[], T]) -> T:
        """Run ``call``; on an internal DuckDB error repair the index and run it once more."""
        seen = self.count
        try:
            return call()
        except BROKEN_DATABASE as exc:
            self._repair(seen, exc)
        seen = self.count
        try:
            return call()
        except BROKEN_DATABASE as exc:
            self._repair(seen, exc)
            raise IndexUnavailable(
                f"the index failed with an internal DuckDB error ({str(exc).splitlines()[0]}) and was "
                "repaired; try again, or rebuild it with `mnemo index --full`"
            ) from exc

    def _repair(self, seen: int, exc: BaseException) -> None:
        """Close the invalidated database, rewrite the index from its rows and reopen it."""
        with self.write_lock:
            if self.count != seen:
                return  # another call repaired it already
            self.count += 1
            log.error("DuckDB reported an internal error; repairing the index: %s", exc)
            self.indexer.recover()
            self.repaired()
