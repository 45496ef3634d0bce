"""RetrievalLog: every search's results, queued cheaply and written by the index's single writer.

A search never waits for the writer to record its results: rows are queued and written the next time
the writer is free (right after the search when nobody is indexing, else at the end of the sync).
The rows land in the index's ``retrievals`` table, so they survive restarts; a full rebuild copies
them into the new generation (see :meth:`mnemo.memory.service.MemoryService.sync`).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from mnemo.index.duckdb_native import duckdb
from mnemo.index.engine import HistoryTables
from mnemo.search.results import SearchOutcome

log = logging.getLogger(__name__)

MAX_QUEUED = 10_000
"""Rows kept while the writer is busy; older ones are dropped past this (statistics, not data)."""

Row = tuple[str, str, int, int, str, datetime, float | None, float, float, float, float, int]


def rows_for(outcome: SearchOutcome, when: datetime) -> list[Row]:
    """One ``retrievals`` row per result, in the table's column order."""
    return [
        (
            hit.key,
            hit.path,
            hit.start_line,
            hit.end_line,
            outcome.query,
            when,
            hit.parts.vector,
            hit.parts.text,
            hit.parts.decay,
            hit.parts.weight,
            hit.parts.score,
            hit.parts.mmr_rank,
        )
        for hit in outcome.results
    ]


class RetrievalLog:
    def __init__(self) -> None:
        self._queue: list[Row] = []
        self._lock = threading.Lock()

    def queue(self, outcome: SearchOutcome, when: datetime | None = None) -> None:
        rows = rows_for(outcome, when or datetime.now())
        if not rows:
            return
        with self._lock:
            self._queue.extend(rows)
            if len(self._queue) > MAX_QUEUED:
                del self._queue[: len(self._queue) - MAX_QUEUED]

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def flush(self, store: HistoryTables | None) -> None:
        """Write the queued rows (the caller holds the writer lock)."""
        if store is None:
            return
        with self._lock:
            rows, self._queue = self._queue, []
        if not rows:
            return
        try:
            store.record_retrievals(rows)
        except duckdb.Error as exc:
            log.warning("retrieval statistics not recorded: %s", exc)
