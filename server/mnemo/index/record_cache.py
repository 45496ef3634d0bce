"""RecordCache: the writer's chunk rows in memory, so a search reads its candidates without SQL.

Every hybrid search reads the rows of its few dozen candidates (path, lines, heading, text). DuckDB
answers ``id IN (...)`` with a scan of the whole table (~1-3 ms at 2,000 notes, whatever the number of
ids), about a sixth of a warm search. Up to :data:`LIMIT` chunks, the first read loads every row;
beyond, the rows read are kept. The store forgets the rows a commit deleted or moved (an inserted chunk
has a new id; a vector filled in changes no row), and clears everything after a build. A read that began
before such a commit never stores what it read (:attr:`epoch`). Rows are kept without vectors (those are
:mod:`mnemo.index.vector_cache`'s).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from mnemo.index.api import ChunkRecord

LIMIT = 20_000
"""Chunks up to which every row is loaded at once (~1.5 KB each with its text); above, rows read are
kept, the cache starting again when it holds this many."""


class RecordCache:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._rows: dict[int, ChunkRecord] = {}
        self._complete = False
        """Every chunk's row was loaded at once (later reads add the chunks inserted or moved since)."""
        self._epoch = 0
        """Bumped by each commit that changes rows: a read from before it is not stored."""

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def complete(self) -> bool:
        """Every chunk's row is kept."""
        return self._complete

    def wants_all(self, chunks: int) -> bool:
        """Whether the next read should load every row (``chunks`` in the index)."""
        return not self._complete and not self._rows and chunks <= self.limit

    def clear(self) -> None:
        with self._lock:
            self._rows, self._complete = {}, False
            self._epoch += 1

    def forget(self, ids: Iterable[int]) -> None:
        """Rows a commit deleted or changed (their next read asks the table)."""
        with self._lock:
            for cid in ids:
                self._rows.pop(cid, None)
            self._epoch += 1

    def get(self, ids: Sequence[int]) -> tuple[dict[int, ChunkRecord], list[int]]:
        """The kept rows of ``ids`` and the ids to read (chunks inserted or moved since the load)."""
        with self._lock:
            rows = self._rows
            found = {cid: rows[cid] for cid in ids if cid in rows}
        return found, [cid for cid in ids if cid not in found]

    def put(self, records: Iterable[ChunkRecord], epoch: int, *, complete: bool = False) -> None:
        """Keep rows read at ``epoch`` (:attr:`epoch` before the read; dropped if a commit came since);
        ``complete``: they are every chunk's."""
        with self._lock:
            if epoch != self._epoch:
                return
            if not complete and len(self._rows) >= self.limit:
                self._rows, self._complete = {}, False
            for record in records:
                self._rows[record.id] = record
            self._complete = self._complete or complete
