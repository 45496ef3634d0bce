"""Pending vectors: chunks committed with their keyword side only, embedded afterwards in batches.

A sync writes every chunk at once with its text, fts postings and, when the embedding cache has it, its
vector; a chunk whose text the model has not seen yet is written with ``embedding = NULL``: it is
*pending*, searchable by keyword at once. :func:`embed_step` then embeds pending chunks, most useful first
(:data:`PRIORITY`), and commits each batch: a process killed mid-way loses at most the batch in hand,
and the next one resumes where the last commit left off (the pending chunks are simply still NULL).

DuckDB's vss HNSW index skips NULL vectors, but an ``UPDATE`` of an HNSW-indexed column crashes DuckDB
1.5.5 (a segfault after two updates in a row, seen while building this). So with the index in place a
batch is written as new rows (same id, key and text, with the vector) and the NULL rows are deleted, in
one transaction: the same insert/delete path every edit takes. Chunk ids stay, so the fts postings are
untouched.

Many pending vectors (:data:`DEFER_INDEX_MIN`: a new workspace, a model change) are filled without the
HNSW index instead: the batch that finds that many drops it, each batch is an ``UPDATE`` in place, and
the batch that leaves none pending builds the index once over every vector. With the index live, every
checkpoint wrote the whole index again and each batch rewrote its rows' text: the file of a 2,000-note
workspace held twice its contents (benchmarks/bench_fill.py), and at 100,000 notes it passed 23 GB
before the vectors were done.
Meanwhile a vector search is an exact scan of the vectors there are.

A workspace whose vectors fit in :data:`EXACT_SEARCH_BYTES` has no HNSW index at all: the writer holds
its vectors in memory anyway (:class:`mnemo.index.vector_cache.VectorCache`) and compares a query with
every one of them, exactly and faster than the index answered, with one copy of the vectors instead of
two and nothing for a crash to damage. :func:`settle_vector_index` creates the index when the vectors
outgrow that and drops it when they shrink to half of it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mnemo.embeddings import Embedder
from mnemo.index.batches import Columns, VectorColumn, batch_view
from mnemo.index.duckdb_native import duckdb
from mnemo.index.writer_api import IndexWriter, PendingChunk

DEFER_INDEX_MIN = 1_024
"""Pending vectors from which they are filled without the HNSW index, built once when the last is in."""

EMBED_BATCH = 32
"""Pending chunks embedded per committed batch (a couple of seconds of a local model on a busy CPU)."""

READ_AHEAD = 16
"""Batches a writer reads ahead of pending chunks at once (:meth:`mnemo.index.store.ChunkStore.pending_batch`):
ordering every pending row for each batch of 32 made a fill's batches slower the more rows were pending."""

PRIORITY = (
    "CASE WHEN path IN ('MEMORY.md', 'memory.md') THEN 0 WHEN kind = 'session' THEN 3 "
    "WHEN day IS NOT NULL THEN 1 ELSE 2 END, day DESC NULLS LAST, path, start_line"
)
"""Which pending chunks are embedded first: MEMORY.md, then dated notes newest first, then undated
notes and skills, then session transcripts."""


class Cancel(Protocol):
    """What stops embedding early (a ``threading.Event``, or several)."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class StepResult:
    """One committed batch: chunks given a vector, how many the model embedded (the rest came from the
    embedding cache), and what is left."""

    filled: int
    embedded: int
    pending: int
    total: int


def pending_batch(con: duckdb.DuckDBPyConnection, limit: int) -> list[PendingChunk]:
    """Up to ``limit`` pending chunks, most useful first."""
    rows = con.execute(
        f"SELECT id, key, heading, text FROM chunks WHERE embedding IS NULL ORDER BY {PRIORITY} LIMIT ?",
        [int(limit)],
    ).fetchall()
    return [
        PendingChunk(cid, key, f"{heading}\n{text}" if heading else text) for cid, key, heading, text in rows
    ]


class ReadAhead:
    """Pending chunks read ahead in priority order, :data:`READ_AHEAD` batches at once (one ordered scan
    of the pending rows, not one a batch), with the embedding cache's vectors for their texts (one scan of
    the cache, not one a batch: it has no index, and at 100,000 notes a batch's lookup was half the
    fill's time). :meth:`drop` it whenever chunks are inserted or deleted (a new chunk may come first,
    and a deleted one is not embedded for nothing) and when a transaction rolls back; :meth:`remember`
    what is cached meanwhile."""

    def __init__(self) -> None:
        self._queue: list[PendingChunk] = []
        self._digests: set[str] = set()
        self._cached: dict[str, np.ndarray] = {}

    def take(
        self,
        con: duckdb.DuckDBPyConnection,
        limit: int,
        lookup: Callable[[Sequence[str]], dict[str, np.ndarray]],
    ) -> list[PendingChunk]:
        """The next ``limit`` pending chunks; ``lookup``: the embedding cache's vectors for digests."""
        if len(self._queue) < limit:
            self._queue = pending_batch(con, limit * READ_AHEAD)
            self._digests = {c.digest for c in self._queue}
            self._cached = lookup(sorted(self._digests)) if self._digests else {}
        batch, self._queue = self._queue[:limit], self._queue[limit:]
        return batch

    def cached(self, digests: Sequence[str]) -> dict[str, np.ndarray] | None:
        """The cache's vectors for ``digests`` as read ahead, None when one of them was not read ahead."""
        if not self._digests.issuperset(digests):
            return None
        return {d: self._cached[d] for d in digests if d in self._cached}

    def remember(self, vectors: dict[str, np.ndarray]) -> None:
        """Vectors just cached: a later batch with the same text takes them as the cache would give them."""
        self._cached.update((d, v) for d, v in vectors.items() if d in self._digests)

    def drop(self) -> None:
        self._queue, self._digests, self._cached = [], set(), {}


HNSW_INDEX = "chunks_hnsw"


EXACT_SEARCH_BYTES = 96 * 1024 * 1024
"""Vectors up to this size (~65,000 chunks of 384 dimensions) are searched exactly in memory, with no
HNSW index (the same limit as the vector cache that holds them: :data:`mnemo.index.vector_cache.LIMIT_BYTES`)."""


def vector_index_wanted(con: duckdb.DuckDBPyConnection, dims: int, *, has_index: bool) -> bool:
    """Whether the index should have an HNSW index: vectors past :data:`EXACT_SEARCH_BYTES`, or, when it
    has one already, past half of it (so that it is not dropped and built again around one size)."""
    if dims <= 0:
        return False
    if EXACT_SEARCH_BYTES <= 0:  # (0: an HNSW index at any size, none of its vectors in yet included)
        return True
    limit = EXACT_SEARCH_BYTES // 2 if has_index else EXACT_SEARCH_BYTES
    most = limit // (dims * 4)
    # Rows first (no vector read: scanning the embedding column would pull all of it into DuckDB's
    # buffers, ~11 MB at 2,000 notes, for good); the vectors only when there are that many rows.
    (rows,) = con.execute("SELECT count(*) FROM chunks").fetchone() or (0,)
    if int(rows) <= most:
        return False
    row = con.execute(
        "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE embedding IS NOT NULL LIMIT ?)", [most + 1]
    ).fetchone()
    return bool(row and int(row[0]) > most)


def settle_vector_index(con: duckdb.DuckDBPyConnection, dims: int) -> bool:
    """Create or drop the HNSW index as :func:`vector_index_wanted` says (never while many vectors are
    pending: the last batch builds it); returns whether the index has one now."""
    present = has_vector_index(con)
    if dims <= 0:
        return present
    wanted = vector_index_wanted(con, dims, has_index=present)
    if present and not wanted:
        con.execute(f"DROP INDEX {HNSW_INDEX}")
        return False
    if wanted and not present and still_pending(con, DEFER_INDEX_MIN) < DEFER_INDEX_MIN:
        create_vector_index(con)
        return True
    return present


def has_vector_index(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute("SELECT count(*) FROM duckdb_indexes() WHERE index_name = ?", [HNSW_INDEX]).fetchone()
    return bool(row and row[0])


def create_vector_index(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON chunks USING HNSW(embedding) WITH (metric = 'cosine')"
    )


def still_pending(con: duckdb.DuckDBPyConnection, at_most: int) -> int:
    """Pending chunks, counted up to ``at_most`` (the scan stops there: a fill asks every batch)."""
    row = con.execute(
        "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE embedding IS NULL LIMIT ?)", [int(at_most)]
    ).fetchone()
    return int(row[0]) if row else 0


def fill_vectors(
    con: duckdb.DuckDBPyConnection, dims: int, chunks: Sequence[PendingChunk], vectors: np.ndarray
) -> tuple[int, bool]:
    """Give still-pending ``chunks`` their vectors (inside the caller's transaction); returns how many,
    and whether the index has an HNSW index afterwards. Drops the HNSW index first when many are
    pending, and builds it when none is left (if the vectors are past what is searched in memory).

    A chunk deleted or rewritten since it was read is skipped (its id and key must both still match:
    a rebuilt generation numbers its chunks from 1 again)."""
    indexed = has_vector_index(con)
    if not chunks:
        return 0, indexed
    if indexed and still_pending(con, DEFER_INDEX_MIN) >= DEFER_INDEX_MIN:
        con.execute(f"DROP INDEX {HNSW_INDEX}")
        indexed = False
    columns: Columns = {"id": ("BIGINT", [c.id for c in chunks]), "key": ("VARCHAR", [c.key for c in chunks])}
    with batch_view(con, "batch", columns, ("embedding", VectorColumn(vectors)), read_once=False):
        filled = _fill_from_batch(con, dims) if indexed else _update_from_batch(con, dims)
    if not indexed and not still_pending(con, 1):
        indexed = settle_vector_index(con, dims)
    return filled, indexed


def _update_from_batch(con: duckdb.DuckDBPyConnection, dims: int) -> int:
    row = con.execute(
        f"UPDATE chunks SET embedding = CAST(b.embedding AS FLOAT[{dims}]) FROM batch b "
        "WHERE chunks.id = b.id AND chunks.key = b.key AND chunks.embedding IS NULL"
    ).fetchone()
    return int(row[0]) if row else 0


def _fill_from_batch(con: duckdb.DuckDBPyConnection, dims: int) -> int:
    columns = "c.id, c.key, c.path, c.source, c.kind, c.day, c.start_line, c.end_line, c.heading, c.text"
    row = con.execute(
        f"INSERT INTO chunks SELECT {columns}, c.terms, c.hash, CAST(b.embedding AS FLOAT[{dims}]) "
        "FROM chunks c JOIN batch b ON c.id = b.id AND c.key = b.key WHERE c.embedding IS NULL"
    ).fetchone()
    filled = int(row[0]) if row else 0
    con.execute(
        "DELETE FROM chunks USING batch b "
        "WHERE chunks.embedding IS NULL AND chunks.id = b.id AND chunks.key = b.key"
    )
    return filled


def embed_step(
    store_of: Callable[[], IndexWriter | None],
    embedder: Embedder,
    *,
    write_lock: contextlib.AbstractContextManager[object] | None = None,
    cancel: Cancel | None = None,
    pause: Callable[[], None] | None = None,
    limit: int = EMBED_BATCH,
) -> StepResult | None:
    """Embed and commit one batch of pending chunks; None when nothing is pending (or no index with
    this model's vectors is open). ``store_of`` gives the writable store (None: none);
    ``write_lock`` guards the store's connection (held only to read the batch and to commit it, never
    while the model runs); ``pause`` is called before each text (to let a search's query embedding go
    first); ``cancel`` stops early, committing what was embedded. The embedder serialises its own
    calls (llama.cpp is not thread-safe), so a search's query embedding simply waits its turn."""
    guard = write_lock if write_lock is not None else contextlib.nullcontext()
    with guard:
        store = store_of()
        if store is None or store.identity.dims == 0:
            return None
        chunks = store.pending_batch(limit)
        if not chunks:
            return None
        cached = store.cached_embeddings(sorted({c.digest for c in chunks}))
    fresh: dict[str, np.ndarray] = {}
    done: list[PendingChunk] = []
    for chunk in chunks:
        if cancel is not None and cancel.is_set():
            break
        digest = chunk.digest
        if digest not in cached and digest not in fresh:
            if pause is not None:
                pause()
            fresh[digest] = embedder.embed([chunk.input])[0]
        done.append(chunk)
    vectors = (
        np.stack([fresh[c.digest] if c.digest in fresh else cached[c.digest] for c in done]) if done else None
    )
    with guard:
        store = store_of()
        if store is None or store.identity.dims == 0:
            return None
        with store.transaction():
            if fresh:
                store.cache_embeddings(fresh)
            filled = store.fill_vectors(done, vectors) if vectors is not None else 0
        counts = store.counts()
    return StepResult(filled, len(fresh), counts.pending, counts.chunks)


@dataclass
class Vectors:
    """Vectors for a file's new chunks: a row per chunk, ``pending`` where none is known yet."""

    matrix: np.ndarray
    pending: list[bool]
    embedded: int
    """Texts the model embedded for this call."""
    cached: int
    """Chunks whose vector came from the embedding cache."""


def vectors_for(
    store: IndexWriter, inputs: Sequence[str], embed: Callable[[str], np.ndarray] | None
) -> Vectors:
    """The vectors of ``inputs`` from the embedding cache; the rest from ``embed`` (each new one cached,
    inside its own transaction), or left pending when ``embed`` is None (a sync: keyword side first)."""
    dims = store.identity.dims
    digests = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in inputs]
    known = store.cached_embeddings(sorted(set(digests)))
    cached = sum(d in known for d in digests)
    fresh: dict[str, np.ndarray] = {}
    if embed is not None:
        for digest, text in sorted(
            {d: t for d, t in zip(digests, inputs, strict=True) if d not in known}.items()
        ):
            fresh[digest] = embed(text)
        if fresh:
            with store.transaction():
                store.cache_embeddings(fresh)
        known.update(fresh)
    out = np.zeros((len(inputs), dims), dtype=np.float32)
    pending = []
    for i, digest in enumerate(digests):
        vector = known.get(digest)
        pending.append(vector is None)
        if vector is not None:
            out[i] = vector
    return Vectors(out, pending, len(fresh), cached)
