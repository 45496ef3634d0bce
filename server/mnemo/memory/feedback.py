"""FeedbackBook: which retrieved chunks helped, learned from chat turns, and the prior it feeds ranking.

A turn's chunks are the ones its searches returned (the ``retrievals`` table: same query, within the
turn's time span, see :mod:`mnemo.memory.turns`); feedback on the turn is recorded on each of them in
the index's ``feedback`` table (:mod:`mnemo.index.feedback`; PostgreSQL's by namespace,
:mod:`mnemo.index.pg_feedback`), written by the index's single writer.

``[search] usefulness_weight`` (0 = off, the default: docs/benchmarks.md, "Feedback") turns the tallies
into a bounded prior: each result's score is multiplied by ``1 + weight x prior`` with the prior in
(-1, 1) (:func:`mnemo.search.ranking.usefulness_prior`), then the results are ordered again by MMR
(:func:`mnemo.search.usefulness.rerank`). Off, searches are exactly as without feedback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo.config import SearchSettings
from mnemo.index import feedback as table
from mnemo.index.duckdb_native import duckdb
from mnemo.index.engine import HistoryTables, IndexEngine
from mnemo.memory.limits import cut_query
from mnemo.memory.turns import (
    FeedbackError,
    FeedbackResult,
    Turn,
    implicit_signals,
    read_events,
    transcript_path,
    turns,
)

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

TURN_SLACK = timedelta(seconds=2)
"""Searches this long before a turn's message (clock rounding) or after its end still count for it."""


def _cited(chunk: table.RetrievedChunk, turn: Turn) -> bool | None:
    """Whether the turn's answers cited (a line of) the chunk; None when they cited nothing."""
    if not turn.cited:
        return None
    return any(
        path == chunk.path and first <= chunk.end_line and last >= chunk.start_line
        for path, first, last in turn.cited
    )


class FeedbackBook:
    """Records feedback (the caller holds no lock; this takes the writer's) and reads tallies."""

    def __init__(
        self,
        root: Path,
        indexer: IndexEngine,
        write_lock: threading.RLock,
        settings: SearchSettings,
        flush_retrievals: Callable[[], object],
        changed: Callable[[], object],
        open_index: Callable[[], None],
    ) -> None:
        """``open_index``: opens the index when none is open (the write lock held)."""
        self.root = root
        self.indexer = indexer
        self._write_lock = write_lock
        self.settings = settings
        self._flush_retrievals = flush_retrievals
        self._changed = changed
        self._open_index = open_index

    # -- recording --------------------------------------------------------------------------------
    def session_turns(self, session_id: str) -> list[Turn]:
        return turns(read_events(transcript_path(self.root, session_id)))

    def record(
        self,
        session_id: str,
        turn: int | None,
        useful: bool,
        *,
        signal: str = "explicit",
        now: datetime | None = None,
    ) -> FeedbackResult:
        """Feedback on turn ``turn`` (None: the latest) of a session, on every chunk that turn
        retrieved; a second one of the same signal on the same turn replaces the first."""
        if signal not in table.SIGNAL_WEIGHTS:
            raise FeedbackError(f"unknown feedback signal {signal!r}")
        found = self.session_turns(session_id)
        if not found:
            raise FeedbackError(f"session {session_id} has no turn yet")
        if turn is None:
            chosen = found[-1]
        elif 1 <= turn <= len(found):
            chosen = found[turn - 1]
        else:
            raise FeedbackError(f"session {session_id} has turns 1-{len(found)}, not {turn}")
        self._flush_retrievals()  # the turn's searches may still wait in the queue
        with self._write_lock:
            return self._write([chosen], session_id, useful, signal, now or datetime.now())[0]

    def harvest(self, session_id: str, *, now: datetime | None = None) -> list[FeedbackResult]:
        """Record the implicit signals (:func:`mnemo.memory.turns.implicit_signals`) of the session's
        finished turns that were not recorded yet."""
        found = self.session_turns(session_id)
        self._flush_retrievals()
        when = now or datetime.now()
        out: list[FeedbackResult] = []
        with self._write_lock:
            done = self._store().feedback_turns(session_id)
            for t in found:
                for signal, useful in implicit_signals(t):
                    if (t.number, signal) not in done:
                        out.extend(self._write([t], session_id, useful, signal, when))
        return out

    def _store(self) -> HistoryTables:
        if self.indexer.store is None:
            self._open_index()
        if self.indexer.store is None:
            raise FeedbackError("the index is not built yet; run `mnemo index` first")
        return self.indexer.store

    def _write(
        self, chosen: list[Turn], session_id: str, useful: bool, signal: str, when: datetime
    ) -> list[FeedbackResult]:
        """Write under the writer lock (held by the caller)."""
        store = self._store()
        out = []
        with store.transaction():
            for t in chosen:
                end = (t.end or when) + TURN_SLACK
                queries = [cut_query(q, self.settings.max_query_chars)[0] for q in t.queries]
                chunks = store.retrieved_between(queries, t.start - TURN_SLACK, end)
                rows = [
                    table.FeedbackRow(c, session_id, t.number, useful, signal, when, _cited(c, t))
                    for c in chunks
                ]
                store.replace_feedback(session_id, t.number, signal, rows)
                out.append(FeedbackResult(session_id, t.number, useful, signal, chunks))
        self._changed()
        return out

    # -- surviving a rebuild ------------------------------------------------------------------------
    def saved(self, full: bool) -> pa.Table | None:
        """Rows to carry into a rebuilt index (read only when a rebuild may happen)."""
        from mnemo.index.store import ChunkStore

        store = self.indexer.store
        if store is None:
            return table.read_table(self.indexer.path)
        if not isinstance(store, ChunkStore):
            return None  # PostgreSQL keeps it by namespace, whatever the generation
        return table.saved_table(store.con) if full else None

    def restore(self, saved: pa.Table | None) -> None:
        from mnemo.index.store import ChunkStore

        store = self.indexer.store
        if saved is None or not isinstance(store, ChunkStore):
            return
        try:
            table.restore(store.con, saved)
        except duckdb.Error as exc:  # an older layout: history, not worth failing a rebuild for
            log.warning("feedback was not carried over the rebuild: %s", exc)
