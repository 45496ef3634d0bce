"""ChunkStore: one DuckDB file per workspace holding files, chunks, vectors, BM25 tables and caches.

The index is a cache of the Markdown. A missing or unreadable file or an older schema means a rebuild
into a new file that is swapped in atomically; another embedding model or chunker means one only when
``mnemo index`` asks (see :class:`mnemo.index.indexer.Indexer`). Crash damage is repaired on open
without losing rows (:mod:`mnemo.index.repair`). The embedding cache keeps every model's vectors.

BM25's tables (dict, docs, postings, stats: :mod:`mnemo.index.fts`) are written in one pass by a full
build and updated in an edit's own transaction, so an edit is searchable at once (or a batch of
changed files': :mod:`mnemo.index.transactions`). Vectors live in a
FLOAT[dims] column (an HNSW cosine index from vss past a size); a NULL vector is a chunk still waiting
for the model (:mod:`mnemo.index.pending`), searched by keyword meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence, Set
from pathlib import Path

import numpy as np

from mnemo.index import file_meta, fts, known_files, pending, repair
from mnemo.index.api import FileProblem, IndexCounts, IndexIdentity
from mnemo.index.batches import VectorColumn, batch_view, row_columns
from mnemo.index.build_file import (
    BUILD_BATCH_FILES,
    FILE_COLUMNS,
    StagedFiles,
    chunk_columns,
    replace_file,
    schema,
)
from mnemo.index.duck import (
    connect,
    lean_checkpoint,
    leanly,
    memory_limit,
    release_buffers,
)
from mnemo.index.duckdb_native import duckdb, sql_ids
from mnemo.index.identity import identity_meta
from mnemo.index.known_files import KnownFiles
from mnemo.index.postings import PostingsCache
from mnemo.index.reader import DuckReader
from mnemo.index.reader_sql import CountsMemo
from mnemo.index.record_cache import RecordCache
from mnemo.index.side_tables import SideTables
from mnemo.index.transactions import Transactions
from mnemo.index.vector_cache import VectorCache
from mnemo.index.writer_api import ChunkRow, ChunkSlot, FileMeta, FileState, PendingChunk

log = logging.getLogger(__name__)


class ChunkStore(Transactions, SideTables):
    """The single writer's view of the index file. Readers take cursors from :meth:`reader`."""

    def __init__(self, path: Path, con: duckdb.DuckDBPyConnection, identity: IndexIdentity) -> None:
        self.path = path
        self._con: duckdb.DuckDBPyConnection | None = con
        self._con_lock = threading.Lock()
        self.identity = identity
        self.postings = PostingsCache()
        """BM25 postings in memory for keyword queries; kept current after each commit."""
        self.counts_memo = CountsMemo()
        """Counts of files, chunks and vectors, kept until the next commit."""
        self.known_files = KnownFiles()  # what a sync compares with the disk, kept until a file's row changes
        self.vector_cache = VectorCache(identity.dims)
        """Chunk vectors in memory for searches; kept current after each commit."""
        self.record_cache = RecordCache()
        """Chunk rows recently read by searches; a chunk's row is forgotten when a commit changes it."""
        self._vectors_changed: list[int] = []
        self._fts_added: list[int] = []
        self._stems_on: duckdb.DuckDBPyConnection | None = None  # has the fts extension's `stem`
        self._fts_removed: list[int] = []
        self._rows_changed: list[int] = []
        """Chunks this transaction deleted or moved: their kept rows are forgotten at commit."""
        self._staged = StagedFiles()
        self._build_open = False
        """A full build's one transaction is open (see :meth:`flush_staged`)."""
        self._counts: IndexCounts | None = None  # kept across fills (a recount: 15 ms/batch at 10k notes)
        self._read_ahead = pending.ReadAhead()
        self._memory_limit: str | None = None
        """DuckDB's limit before the first :meth:`release_buffers` lowered it for a moment."""
        with contextlib.suppress(duckdb.Error):  # an index from before the table: added, no rebuild
            file_meta.ensure(con)
        if identity.dims > 0:
            self.vector_cache.exact = not pending.has_vector_index(con)

    # -- creating (opening an existing file: mnemo.index.opening) ------------------------------
    @classmethod
    def create(cls, path: Path, identity: IndexIdentity) -> ChunkStore:
        """A new, empty index at ``path`` (a building file; see :meth:`finish_indexes` and :meth:`swap_into`)."""
        for stale in (path, repair.wal_path(path)):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        # No vectors, no HNSW index: vss is not loaded (0.13 s). One thread: see connect.
        con = connect(path, vss=identity.dims > 0, threads=1)
        for statement in schema(identity.dims):
            con.execute(statement)
        con.executemany("INSERT INTO meta VALUES (?, ?)", list(identity_meta(identity).items()))
        fts.create_empty(con)
        return cls(path, con, identity)

    def finish_indexes(self) -> None:
        """Build the secondary indexes of a building file and mark it complete (slow part of a build)."""
        self.flush_staged()
        fts.rebuild(self.con)  # in the build's transaction, if open: its rows are logged once
        self._commit_build()
        self.postings.invalidate()
        self.vector_cache.invalidate()
        self.record_cache.clear()
        # An HNSW index only for vectors past what is searched in memory, and not while many are
        # pending (built when the last vector is in).
        self.vector_cache.exact = not pending.settle_vector_index(self.con, self.identity.dims)
        self.con.execute("INSERT INTO meta VALUES ('complete', '1')")
        self.con.execute("CHECKPOINT")

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection (after :meth:`swap_into`, opened on first use: `mnemo index` exits without)."""
        con = self._con
        if con is None:
            with self._con_lock:
                if self._con is None:
                    self._con = connect(self.path, vss=self.identity.dims > 0)
                con = self._con
        return con

    def swap_into(self, final_path: Path) -> None:
        """Rename the completed building file over ``final_path`` atomically; it is reopened there
        on first use."""
        self.con.close()
        self._con = None
        replace_file(self.path, final_path)
        self.path = final_path

    def close(self, *, checkpoint: bool = True) -> None:
        """Close the file; ``checkpoint=False`` after DuckDB invalidated the database (nothing more is
        written to it)."""
        if self._con is None:
            return  # swapped in and never reopened: checkpointed before the swap
        if checkpoint:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("CHECKPOINT")
        with contextlib.suppress(duckdb.Error):
            self.con.close()

    def checkpoint(self) -> None:
        """What DuckDB holds for the writes since the last checkpoint goes to the file
        (:func:`mnemo.index.duck.lean_checkpoint`); then the blocks it read go too. The caller holds the
        connection alone."""
        lean_checkpoint(self.con, self._usual_memory_limit())
        self.release_buffers()

    def load_caches(self) -> None:
        """Every chunk's row and vector into this store's caches now, up to their limits, with DuckDB
        keeping few of the blocks they are read from (:func:`mnemo.index.duck.leanly`; the start's peak at
        2,000 notes, docs/benchmarks.md); then the rest go (:meth:`release_buffers`). The caller holds
        the connection alone."""
        if self._caches_hold_all():
            return
        cursor = self.reader()
        try:
            leanly(self.con, self._usual_memory_limit(), self.read_with(cursor).load_caches)
        finally:
            cursor.close()
        self.release_buffers()

    def _usual_memory_limit(self) -> str:
        if self._memory_limit is None:
            self._memory_limit = memory_limit(self.con)
        return self._memory_limit

    def release_buffers(self) -> bool:
        """Evict the file's blocks from DuckDB's buffer pool (:func:`mnemo.index.duck.release_buffers`)
        when this store's caches hold every chunk's row and vector: what a search reads stays in memory.
        The caller holds the connection alone (the write lock, no reader). False when nothing was done."""
        if self._con is None or not self._caches_hold_all():
            return False
        return release_buffers(self._con, self._usual_memory_limit())

    def _caches_hold_all(self) -> bool:
        """The record cache holds every chunk's row, and the vector cache every vector (if any)."""
        return self.record_cache.complete and (self.identity.dims == 0 or self.vector_cache.holds_all)

    def reader(self) -> duckdb.DuckDBPyConnection:
        """A cursor for another thread; it sees committed data only."""
        return self.con.cursor()

    def read_with(self, con: duckdb.DuckDBPyConnection) -> DuckReader:
        """The read API on ``con`` (a cursor from :meth:`reader`), keyword queries on this store's postings."""
        return DuckReader(
            con, self.identity, self.postings, self.counts_memo, self.vector_cache, self.record_cache
        )

    # -- files --------------------------------------------------------------------------------
    def file_states(self) -> Mapping[str, FileState]:
        return self.known_files.states(self.con)

    def file_problems(self) -> list[FileProblem]:
        return DuckReader(self.con, self.identity).file_problems()

    def chunk_keys(self, path: str) -> dict[str, ChunkSlot]:
        """A file's current chunks by key."""
        vector = "embedding IS NOT NULL" if self.identity.dims > 0 else "false"
        rows = self.con.execute(f"SELECT key, id, {vector} FROM chunks WHERE path = ?", [path]).fetchall()
        return {key: ChunkSlot(cid, bool(has)) for key, cid, has in rows}

    # -- writes (inside a transaction) ----------------------------------------------------------
    def upsert_file(
        self,
        path: str,
        kind: str,
        source: str,
        day: str | None,
        digest: str,
        mtime: float,
        size: int,
        chunks: int,
        problem: str | None,
    ) -> None:
        self._rows_written(files=True)
        # Updated in place: DuckDB keeps each table's rows appended since its last checkpoint in blocks of
        # 256 KB a column, so a row deleted and inserted again held 4.5 MB from an edit to the checkpoint.
        updated = self.con.execute(
            "UPDATE files SET kind = ?, source = ?, day = ?, hash = ?, mtime = ?, size = ?, chunks = ?, "
            "problem = ? WHERE path = ?",
            [kind, source, day, digest, mtime, size, chunks, problem, path],
        ).fetchone()
        if not updated or not updated[0]:
            self.con.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [path, kind, source, day, digest, mtime, size, chunks, problem],
            )

    def touch_files(self, stamps: Sequence[tuple[str, float, int]]) -> None:  # (known_files.touch)
        self.known_files.changing()
        known_files.touch(self.con, stamps)

    def write_meta(self, path: str, meta: FileMeta) -> None:
        self.known_files.changing()
        file_meta.write(self.con, path, meta)

    def meta_paths(self) -> Set[str]:
        return self.known_files.with_meta(self.con)

    def delete_file(self, path: str) -> None:
        self._rows_written(files=True)
        ids = [row[0] for row in self.con.execute("SELECT id FROM chunks WHERE path = ?", [path]).fetchall()]
        self.delete_chunks(ids)
        self.con.execute("DELETE FROM files WHERE path = ?", [path])
        file_meta.delete(self.con, path)

    def delete_chunks(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        self._rows_written()
        self._fts_removed.extend(ids)  # (the BM25 tables are updated at the commit: _index_fts)
        self._vectors_changed.extend(ids)
        self._rows_changed.extend(ids)
        self.con.execute(f"DELETE FROM chunks WHERE id IN ({sql_ids(ids)})")

    def move_chunks(self, moves: Sequence[tuple[int, int, int]]) -> None:
        """Set new line ranges of kept chunks, ``(chunk id, start, end)``, in one statement."""
        if not moves:
            return
        self._rows_changed.extend(cid for cid, _, _ in moves)
        values = ", ".join(f"({int(cid)}, {int(start)}, {int(end)})" for cid, start, end in moves)
        self.con.execute(
            "UPDATE chunks SET start_line = m.start_line, end_line = m.end_line "
            f"FROM (VALUES {values}) m(id, start_line, end_line) WHERE chunks.id = m.id"
        )

    # -- a full build: many files a statement -----------------------------------------------------
    def stage_file(
        self,
        rows: Sequence[ChunkRow],
        vectors: np.ndarray | None,
        file_row: tuple[object, ...],
        pending: Sequence[bool] = (),
        meta: FileMeta | None = None,
    ) -> None:
        """Queue a file's chunks, ``files`` row and ``file_meta`` row (building index only); every
        BUILD_BATCH_FILES files, and at :meth:`flush_staged`, they are written together. ``pending``:
        rows written without a vector (see :mod:`mnemo.index.pending`)."""
        if self._staged.add(rows, vectors, file_row, pending, meta) >= BUILD_BATCH_FILES:
            self.flush_staged()

    def _commit_build(self) -> None:
        if self._build_open:
            self._build_open = False
            self.con.execute("COMMIT")
            self.known_files.transaction_ended()
            self.counts_memo.changed()
            self._vectors_changed = []  # a building index's caches are filled after finish_indexes

    def flush_staged(self) -> None:
        """Write the queued files (one chunk, files and file_meta insert) in the build's one transaction,
        committed by :meth:`finish_indexes` (or the next :meth:`transaction`). Not one a batch: nothing
        reads a building file, a crash discards it anyway, and each commit would write its rows to the
        log once more before the checkpoint writes them to the file."""
        staged, self._staged = self._staged, StagedFiles()
        if not staged.files:
            return
        vectors = np.concatenate(staged.vectors) if staged.vectors else None
        if not self._build_open:
            self.con.execute("BEGIN TRANSACTION")
            self._build_open = True
        self.insert_chunks(staged.rows, vectors, live=False, pending=staged.pending)
        self._rows_written(files=True)
        with batch_view(self.con, "staged", row_columns(staged.files, FILE_COLUMNS), build=True):
            self.con.execute("INSERT INTO files SELECT * FROM staged")
        file_meta.write_many(self.con, staged.metas)

    def insert_chunks(
        self,
        rows: Sequence[ChunkRow],
        vectors: np.ndarray | None,
        *,
        live: bool,
        pending: Sequence[bool] = (),
    ) -> None:
        """Add chunks (and, when ``live``, their BM25 postings; a building index indexes at the end).
        Rows marked in ``pending`` get a NULL vector: embedded later (:mod:`mnemo.index.pending`)."""
        if not rows:
            return
        self._rows_written()
        first = self.con.execute("SELECT nextval('chunk_ids') FROM range(?)", [len(rows)]).fetchall()
        ids = [row[0] for row in first]
        columns = chunk_columns(ids, rows)
        embedding = None
        if self.identity.dims > 0:
            assert vectors is not None and vectors.shape == (len(rows), self.identity.dims)
            embedding = ("embedding", VectorColumn(vectors, missing=pending))
        with batch_view(self.con, "batch", columns, embedding, build=not live):
            self.con.execute("INSERT INTO chunks SELECT * FROM batch")
        self._vectors_changed.extend(ids)
        if live:
            self._fts_added.extend(ids)  # (indexed for BM25 at the commit: _index_fts)

    def _rows_written(self, *, files: bool = False) -> None:
        """Chunks (``files``: and files) are written: count again, read pending chunks (and files) afresh."""
        self._counts = None
        self._read_ahead.drop()
        if files:
            self.known_files.changing()

    # -- pending vectors (mnemo.index.pending) -----------------------------------------------------
    def pending_batch(self, limit: int) -> list[PendingChunk]:
        return self._read_ahead.take(self.con, limit, self.cache_lookup)

    def fill_vectors(self, chunks: Sequence[PendingChunk], vectors: np.ndarray) -> int:
        self._vectors_changed.extend(c.id for c in chunks)
        filled, indexed = pending.fill_vectors(self.con, self.identity.dims, chunks, vectors)
        self.vector_cache.exact = not indexed  # (the last batch may build it; a first one, drop it)
        if self._counts is not None:
            self._counts = self._counts.after_fill(filled)
        return filled

    def counts(self) -> IndexCounts:
        """Files, chunks and vectors as this writer sees them (its own transaction's writes included)."""
        if self._counts is None:
            self._counts = DuckReader(self.con, self.identity, memo=self.counts_memo).counts()
        return self._counts
