"""The writer's transactions: one for a file's write, or one for a batch of files (:meth:`batched`), and
what follows a commit (the BM25 tables, the caches in memory) — a mixin of
:class:`mnemo.index.store.ChunkStore`.

A transaction's chunk changes reach the BM25 tables just before it commits, in one pass for all its
files (:meth:`Transactions._index_fts`): a pass for each file cost ~20 ms of the ~33 ms a file of a
300-file pull took. A batch opens its transaction at its first write, so a sync that reads files and
writes none (an mtime-only change) opens none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from mnemo.index import fts, pending
from mnemo.index.api import IndexCounts
from mnemo.index.duck import load_extension
from mnemo.index.duckdb_native import duckdb
from mnemo.index.known_files import KnownFiles
from mnemo.index.postings import PostingsCache
from mnemo.index.reader_sql import CountsMemo
from mnemo.index.record_cache import RecordCache
from mnemo.index.vector_cache import VectorCache


class Transactions:
    known_files: KnownFiles
    postings: PostingsCache
    counts_memo: CountsMemo
    vector_cache: VectorCache
    record_cache: RecordCache
    _read_ahead: pending.ReadAhead
    _counts: IndexCounts | None
    _stems_on: duckdb.DuckDBPyConnection | None
    _vectors_changed: list[int]
    _fts_added: list[int]
    _fts_removed: list[int]
    _rows_changed: list[int]
    """Chunks this transaction deleted or moved: their kept rows are forgotten at commit."""
    _batch_thread: int | None = None
    """Inside :meth:`batched`, the thread whose batch it is: only its transactions join it (writers hold
    the service's write lock; one that did not would fail at its BEGIN, not slip into the batch)."""
    _batch_begun = False
    """The batch's transaction is open (at its first write)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        raise NotImplementedError

    def _commit_build(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One transaction; inside :meth:`batched`, the batch's (what it writes commits with the batch)."""
        if self._batch_thread == threading.get_ident():
            if not self._batch_begun:
                self._begin()
                self._batch_begun = True
            yield self.con
            return
        self._begin()
        try:
            yield self.con
            self._index_fts()
        except BaseException:
            self._rollback()
            raise
        self._commit()

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Several files' writes in one transaction: a sync that finds many files changed (a pull, a
        checkout) commits them together (each file still old or new after a crash)."""
        self._batch_thread, self._batch_begun = threading.get_ident(), False
        try:
            yield
            if self._batch_begun:
                self._index_fts()
        except BaseException:
            self._batch_thread = None
            if self._batch_begun:
                self._rollback()
            raise
        self._batch_thread = None
        if self._batch_begun:
            self._commit()

    def _begin(self) -> None:
        self._commit_build()
        self.con.execute("BEGIN TRANSACTION")

    def _rollback(self) -> None:
        self.known_files.transaction_ended()
        self._fts_added, self._fts_removed, self._vectors_changed = [], [], []
        self._rows_changed = []
        self._counts = None
        self._read_ahead.drop()  # (what it remembered as cached is rolled back too)
        self.con.execute("ROLLBACK")

    def _commit(self) -> None:
        counts, self._counts = self._counts, None  # (kept only if the commit goes through)
        self.con.execute("COMMIT")
        self.known_files.transaction_ended()
        self._counts = counts
        try:
            self._caches_after_commit()
        finally:  # last: counts memoized from now on take their vectors from the cache just updated
            self.counts_memo.changed()

    def _index_fts(self) -> None:
        """The transaction's chunk changes into the BM25 tables, in one pass for all its files."""
        if not (self._fts_added or self._fts_removed):
            return
        added, removed = set(self._fts_added), set(self._fts_removed)
        gone = [cid for cid in self._fts_removed if cid not in added]  # (one added and deleted: never in)
        new = [cid for cid in self._fts_added if cid not in removed]
        fts.remove_docs(self.con, gone)
        if new:
            if self._stems_on is not self.con:  # a writer's first edit: `stem` for fts.add_docs
                load_extension(self.con, "fts")
                self._stems_on = self.con
            fts.add_docs(self.con, new)
        self._fts_added, self._fts_removed = new, gone  # what the postings in memory apply at the commit

    def _caches_after_commit(self) -> None:
        if self._rows_changed:
            changed_rows, self._rows_changed = self._rows_changed, []
            self.record_cache.forget(changed_rows)
        if self._vectors_changed:
            changed, self._vectors_changed = self._vectors_changed, []
            self.vector_cache.apply(self.con, changed)
        if self._fts_added or self._fts_removed:
            added, removed = self._fts_added, self._fts_removed
            self._fts_added, self._fts_removed = [], []
            self.postings.apply(self.con, added, removed)
