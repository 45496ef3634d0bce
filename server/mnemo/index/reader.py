"""DuckReader: the DuckDB engine's :class:`mnemo.index.api.IndexReader`, on one reader cursor.

Every read the search and the services make goes through it, so their SQL lives here: counts, file
problems, chunk statistics for hovers and lenses, chunk rows and vectors by id, nearest neighbours on
the HNSW index, BM25 (the writer's in-memory postings when given, else the fts tables) and the chunk
ids a search filter allows (the SQL pieces they share are in :mod:`mnemo.index.reader_sql`).
:meth:`mnemo.index.indexer.Indexer.reading` hands one out, holding the generation against a swap while
it is used.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from mnemo.index.duckdb_native import duckdb, id_ranges

if TYPE_CHECKING:  # NumPy is loaded by the reads that return vectors: a keyword one-shot never does
    import numpy as np

    from mnemo.index.feedback import Tally
    from mnemo.index.postings import PostingsCache
    from mnemo.index.record_cache import RecordCache
    from mnemo.index.vector_cache import VectorCache

from mnemo.index import fts
from mnemo.index.api import (
    ChunkFilter,
    ChunkRecord,
    ChunkStats,
    FileProblem,
    IndexCounts,
    IndexIdentity,
    KeywordHit,
    LastRetrieval,
    VectorHit,
)
from mnemo.index.reader_sql import (
    FETCHALL,
    FETCHNUMPY,
    RECORD_COLUMNS,
    CountsMemo,
    filter_condition,
    float32_rows,
    record_of,
    rows_by_id,
    vector_literal,
    vector_query,
)

RECORD_PAGE = 2048
"""Rows a page when the writer's record cache loads every chunk (:meth:`DuckReader._every_record`)."""

POINT_READS_PAST = 65_536
"""Past this many chunks a few rows are read by id through their rowids, a point read each: an ``IN``
list of scattered ids made DuckDB read a 2,048-row vector of every column it returns for each (at
100,000 notes, 24 vectors by id took ~120 ms, by rowid ~10 ms; docs/benchmarks.md, team memory)."""
POINT_READS_AT_MOST = 256
"""More ids than this are read the plain way (one statement of as many point reads would be as deep)."""


class DuckReader:
    """Reads of one committed generation through ``con`` (a cursor of the index's connection)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        identity: IndexIdentity,
        postings: PostingsCache | None = None,
        memo: CountsMemo | None = None,
        vector_cache: VectorCache | None = None,
        record_cache: RecordCache | None = None,
    ) -> None:
        self.con = con
        self._record_cache = record_cache
        """The writer's recently read chunk rows (None: every read asks the table)."""
        self._identity = identity
        self._memo = memo
        """The writer's counts between commits (None: counted on every call)."""
        self._chunk_rows: int | None = None
        """The chunks in the table, once counted (:meth:`_point_reads`)."""
        self._vector_cache = vector_cache
        """The writer's vectors in memory (None: read from the table)."""
        self._postings = postings
        """The writer's BM25 postings in memory (None: keyword queries scan the fts tables)."""
        self._weights: tuple[tuple[str, ...], fts.QueryWeights | None] | None = None
        """The last query terms' IDF (a search asks for the top chunks, then scores a few more)."""

    @property
    def identity(self) -> IndexIdentity:
        return self._identity

    @property
    def _with_vectors(self) -> bool:
        return self._identity.dims > 0

    # -- status ---------------------------------------------------------------------------------------
    def counts(self) -> IndexCounts:
        writes = self._memo.writes if self._memo is not None else 0
        found = self._memo.get(writes) if self._memo is not None else None
        if found is None:
            found = self._count()
            if self._memo is not None:
                self._memo.put(writes, found)
        return found

    def _count(self) -> IndexCounts:
        held = self._vector_cache.held() if self._vector_cache is not None and self._with_vectors else None
        # Counting the vectors in the table reads the whole column (~12 MB at 2,000 notes): the writer's
        # cache knows when it holds every one.
        vectors = str(held) if held is not None else "count(embedding)" if self._with_vectors else "0"
        row = self.con.execute(
            f"SELECT (SELECT count(*) FROM files), count(*), {vectors} FROM chunks"
        ).fetchone()
        files, chunks, embedded = (int(v) for v in row) if row else (0, 0, 0)
        pending = chunks - embedded if self._with_vectors else 0
        return IndexCounts(files, chunks, embedded, pending)

    def file_problems(self) -> list[FileProblem]:
        rows = self.con.execute(
            "SELECT path, problem FROM files WHERE problem IS NOT NULL ORDER BY path"
        ).fetchall()
        return [FileProblem(path, problem) for path, problem in rows]

    def feedback_tallies(self, keys: Sequence[str]) -> dict[str, Tally]:
        from mnemo.index import feedback  # only with the usefulness prior on: a search rarely loads it

        return feedback.tallies(self.con, keys)

    def chunk_stats(self, path: str) -> list[ChunkStats]:
        rows = self.con.execute(
            "SELECT c.key, c.start_line, c.end_line, c.heading, c.day, count(r.chunk_key), "
            "arg_max([r.query, CAST(r.searched_at AS VARCHAR), CAST(r.vector AS VARCHAR), "
            "CAST(r.text AS VARCHAR), CAST(r.decay AS VARCHAR), CAST(r.weight AS VARCHAR), "
            "CAST(r.score AS VARCHAR), CAST(r.rank AS VARCHAR)], r.searched_at) "
            "FROM chunks c LEFT JOIN retrievals r ON r.chunk_key = c.key WHERE c.path = ? "
            "GROUP BY c.key, c.start_line, c.end_line, c.heading, c.day ORDER BY c.start_line",
            [path],
        ).fetchall()
        return [
            ChunkStats(
                key,
                start,
                end,
                heading or "",
                day,
                int(count),
                None if not count or last is None else LastRetrieval.from_fields(last),
            )
            for key, start, end, heading, day, count, last in rows
        ]

    # -- chunks by id -----------------------------------------------------------------------------------
    def records(self, ids: Sequence[int], *, with_vectors: bool = False) -> dict[int, ChunkRecord]:
        if not ids:
            return {}
        cache = self._record_cache
        self._hold_every_record()
        found, missing = cache.get(ids) if cache is not None else ({}, list(ids))
        if missing:
            epoch = cache.epoch if cache is not None else 0
            rows = rows_by_id(
                self.con, RECORD_COLUMNS, missing, FETCHALL, point=self._point_reads(missing), complete=True
            )
            read = [record_of(row) for row in rows]
            if cache is not None:
                cache.put(read, epoch)
            found.update((record.id, record) for record in read)
        if with_vectors:
            vectors = self.vectors(list(found))
            found = {cid: dataclasses.replace(r, embedding=vectors.get(cid)) for cid, r in found.items()}
        return found

    def load_caches(self) -> None:
        """The writer's record and vector caches loaded now, where this reader has them
        (:meth:`mnemo.index.store.ChunkStore.load_caches`)."""
        self._hold_every_record()
        if self._vector_cache is not None and self._with_vectors:
            self._vector_cache.load(self.con)

    def _hold_every_record(self) -> None:
        """Every chunk's row into the writer's record cache, once, when it is small enough to hold them."""
        cache = self._record_cache
        if cache is not None and cache.wants_all(self.counts().chunks):
            epoch = cache.epoch
            cache.put(self._every_record(), epoch, complete=True)

    def _every_record(self) -> list[ChunkRecord]:
        """Every chunk's row, read by ranges of ids of ~:data:`RECORD_PAGE` rows: one statement for all
        held DuckDB's whole result and every row's tuple at once (at a server's start, under the first
        diagnostics pass: part of a 320 MB peak at 2,000 notes)."""
        bounds = self.con.execute("SELECT count(*), min(id), max(id) FROM chunks").fetchone()
        count, low, high = bounds if bounds is not None else (0, None, None)
        if not count or low is None or high is None:
            return []
        sql = f"SELECT {RECORD_COLUMNS} FROM chunks WHERE id >= ? AND id < ?"
        return [
            record_of(row)
            for start, stop in id_ranges(int(count), int(low), int(high), RECORD_PAGE)
            for row in self.con.execute(sql, [start, stop]).fetchall()
        ]

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not ids or not self._with_vectors:
            return {}
        cached = self._vector_cache.get(self.con, ids) if self._vector_cache is not None else None
        if cached is not None:
            return cached
        found = rows_by_id(
            self.con,
            "id, embedding",
            ids,
            FETCHNUMPY,
            point=self._point_reads(ids),
            also="AND embedding IS NOT NULL",
        )
        return dict(zip(found["id"].tolist(), float32_rows(found["embedding"]), strict=True))

    def _point_reads(self, ids: Sequence[int]) -> bool:
        """Whether ``ids`` are read by rowid: few of them, from a table past :data:`POINT_READS_PAST`
        chunks (its rows counted once a reader, or the writer's counts when it holds them; counting the
        vectors too, as :meth:`counts` does, would read the embedding column)."""
        if len(ids) > POINT_READS_AT_MOST:
            return False
        if self._chunk_rows is None:
            held = self._memo.get(self._memo.writes) if self._memo is not None else None
            row = None if held is not None else self.con.execute("SELECT count(*) FROM chunks").fetchone()
            self._chunk_rows = held.chunks if held is not None else int(row[0]) if row else 0
        return self._chunk_rows > POINT_READS_PAST

    def chunks_of(self, path: str, *, with_vectors: bool = False) -> list[ChunkRecord]:
        ids = [
            int(row[0])
            for row in self.con.execute(
                "SELECT id FROM chunks WHERE path = ? ORDER BY start_line, id", [path]
            ).fetchall()
        ]
        found = self.records(ids, with_vectors=with_vectors)
        return [found[cid] for cid in ids if cid in found]

    def embedded_chunks(self, source: str) -> list[ChunkRecord]:
        if not self._with_vectors:
            return []
        sql = "FROM chunks WHERE source = ? AND embedding IS NOT NULL ORDER BY path, start_line, id"
        if self._record_cache is not None and self._vector_cache is not None:
            # The writer holds the rows and vectors: only the ids are read, nothing is copied twice
            # (a workspace diagnostics pass asks for every memory chunk). Which have a vector is the
            # caches' answer: `embedding IS NOT NULL` read every vector's block into DuckDB's buffers
            # again at each pass (~11 MB at 2,000 notes).
            ids = self._ids_of(source)
            found = self.records(ids, with_vectors=True)
            return [found[cid] for cid in ids if cid in found and found[cid].embedding is not None]
        rows = self.con.execute(f"SELECT {RECORD_COLUMNS} {sql}", [source]).fetchall()
        vectors = float32_rows(
            self.con.execute(f"SELECT embedding {sql}", [source]).fetchnumpy()["embedding"]
        )
        return [record_of(row, vector) for row, vector in zip(rows, vectors, strict=True)]

    def nearest_in_other_files(
        self, source: str, comparable: Callable[[ChunkRecord], bool]
    ) -> list[tuple[ChunkRecord, ChunkRecord, float]]:
        if not self._with_vectors:
            return []
        # The rows only: which have a vector is the writer's cache's answer (or the gathered vectors').
        ids = self._ids_of(source)
        found = self.records(ids)
        kept = [found[cid] for cid in ids if cid in found and comparable(found[cid])]
        from mnemo.index.nearest_across import pairs_across_files  # (NumPy: a one-shot search never)

        return pairs_across_files(kept, self._nearest_across)

    def _ids_of(self, source: str) -> list[int]:
        """The ids of ``source``'s chunks by path and start line (the vector column is not read)."""
        sql = "SELECT id FROM chunks WHERE source = ? ORDER BY path, start_line, id"
        return [int(row[0]) for row in self.con.execute(sql, [source]).fetchall()]

    def _nearest_across(self, groups: Mapping[int, int]) -> dict[int, tuple[int, float]]:
        from mnemo.index.nearest_across import nearest_across_vectors

        cache = self._vector_cache
        nearest = cache.nearest_across(self.con, groups) if cache is not None else None
        return nearest if nearest is not None else nearest_across_vectors(self.vectors(list(groups)), groups)

    # -- candidates -------------------------------------------------------------------------------------
    def nearest(
        self, vector: np.ndarray, limit: int, *, within: Sequence[int] | None = None
    ) -> list[VectorHit]:
        if not self._with_vectors or (within is not None and not within):
            return []
        cache = self._vector_cache
        if cache is not None and cache.exact:  # no HNSW index: every vector, in memory
            exact = cache.nearest(self.con, vector, limit, within)
            if exact is not None:
                return [VectorHit(cid, distance) for cid, distance in exact]
        # The vector goes in as a literal: it is a constant the HNSW index scan can use, and
        # DuckDB converts a 384-float Python parameter far more slowly than it parses one.
        literal = vector_literal(vector)
        if within is None:
            rows = self.con.execute(vector_query(literal, limit)).fetchall()
        else:
            rows = self.con.execute(vector_query(literal, limit, within=within)).fetchall()
        return [VectorHit(int(cid), float(distance)) for cid, distance in rows]

    def _bm25(
        self, terms: Sequence[str], limit: int, only_ids: Sequence[int] | None
    ) -> list[tuple[int, float, float, float]]:
        if not terms or (only_ids is not None and not only_ids):
            return []
        key = tuple(terms)
        if self._weights is None or self._weights[0] != key:
            read = functools.partial(fts.query_weights, self.con, terms)
            self._weights = (key, self._memo.weights(key, read) if self._memo is not None else read())
        weights = self._weights[1]
        if weights is None:
            return []
        if self._postings is not None:
            return self._postings.search(self.con, terms, limit=limit, only_ids=only_ids, weights=weights)
        return fts.search(self.con, terms, limit=limit, only_ids=only_ids, weights=weights)

    def keyword_top(
        self, terms: Sequence[str], limit: int, *, within: Sequence[int] | None = None
    ) -> list[KeywordHit]:
        return [KeywordHit(*row) for row in self._bm25(terms, limit, within)[:limit]]

    def keyword_scores(self, terms: Sequence[str], ids: Sequence[int]) -> list[KeywordHit]:
        return [KeywordHit(*row) for row in self._bm25(terms, len(ids), ids)]

    def allowed_ids(self, chunk_filter: ChunkFilter) -> list[int]:
        condition, params = filter_condition(chunk_filter)
        sql = f"SELECT c.id FROM chunks c LEFT JOIN file_meta m ON m.path = c.path WHERE {condition}"
        return [int(row[0]) for row in self.con.execute(sql, params).fetchall()]
