"""PgReader: the PostgreSQL engine's :class:`mnemo.index.api.IndexReader`, on one snapshot.

Handed out by :meth:`mnemo.index.pg_indexer.PgIndexer.reading` on a pooled connection inside a
REPEATABLE READ, READ ONLY transaction: every question sees the same committed state, and readers never
wait for writers. Nearest neighbours use the generation's HNSW index (pgvector, cosine) with iterative
index scans, so a query with a filter still finds ``limit`` rows; a search restricted to a list of
chunk ids (``within``) is exact, as in the DuckDB engine, unless the list is a filter's many ids
(:mod:`mnemo.index.pg_filters`), which the HNSW scan filters itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import Any

import numpy as np
import psycopg

from mnemo.index import pg_feedback, pg_filters, pg_memos, pg_terms, pg_vectors
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
from mnemo.index.feedback import Tally
from mnemo.index.nearest_across import nearest_across_vectors, pairs_across_files
from mnemo.index.pg_filters import AllowedMemo, FilteredIds, uses_file_meta
from mnemo.index.pg_prefetch import PostingsPrefetch
from mnemo.index.pg_schema import SCHEMA, Generation, vector_expression

EXACT_WITHIN = 20_000
"""A ``within`` list up to this long is searched exactly (by id); a longer one through the HNSW index."""
EXACT_FILTERED, FILTERED_SHARE = 1_000, 0.02
"""A filter's ids (:class:`mnemo.index.pg_filters.FilteredIds`) up to this many, or under this share of
the chunks, are searched exactly by id; more are found by the HNSW scan with the filter's condition (an
iterative scan reads about ``limit / share`` neighbours to find ``limit`` that pass)."""
HNSW_EF_SEARCH = 100
SNAPSHOT_SETTINGS = (
    f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {HNSW_EF_SEARCH}"
)
"""What a reader's snapshot sets as it begins (with ``BEGIN``, no round trip of its own): HNSW scans that
go on until ``limit`` rows pass a filter, at least :data:`HNSW_EF_SEARCH` candidates."""
_RECORD = "id, key, path, source, kind, day, start_line, end_line, heading, text"


def _record(row: tuple[object, ...], vector: object = None) -> ChunkRecord:
    cid, key, path, source, kind, day, start, end, heading, text = row[:10]
    embedding = np.asarray(vector, dtype=np.float32) if vector is not None else None
    return ChunkRecord(
        int(str(cid)), str(key), str(path), str(source), str(kind), day if isinstance(day, date) else None,
        int(str(start)), int(str(end)), str(heading or ""), str(text), embedding=embedding,
    )  # fmt: skip


class PgReader:
    """Reads of one generation through ``con`` (inside a snapshot transaction)."""

    def __init__(
        self,
        con: psycopg.Connection,
        generation: Generation,
        memo: pg_memos.PostingsMemo | None = None,
        allowed: AllowedMemo | None = None,
        weights: pg_memos.WeightsMemo | None = None,
        hnsw_ef: int = 0,
        prefetch: PostingsPrefetch | None = None,
    ) -> None:
        self.con = con
        self.generation = generation
        self.g = generation.id
        self._memo = memo
        """The process's recently used postings (:class:`mnemo.index.pg_memos.PostingsMemo`)."""
        self._allowed = allowed
        """The process's recently used filters' ids (:class:`mnemo.index.pg_filters.AllowedMemo`)."""
        self._on_pruned = None if prefetch is None else prefetch.want
        """Told the stems a pruned keyword search lacked (:mod:`mnemo.index.pg_prefetch` reads them)."""
        self._hnsw_ef = hnsw_ef
        """The HNSW search breadth this snapshot has set (0: none: :data:`SNAPSHOT_SETTINGS` not run)."""
        self._read_vectors: dict[int, np.ndarray | None] = {}
        """Vectors read with the records in this snapshot (None: the chunk has none yet)."""
        self._near: set[int] = set()
        """Chunks a nearest-neighbour search of this snapshot returned: their distance is known, and
        :meth:`records` leaves their vectors out (a search's rows are read right after its candidates)."""
        self._weights = pg_memos.SnapshotWeights(generation.id, generation.version, weights)
        """Query statistics read in this snapshot (a search asks twice: top-k, then by id) or kept by the
        process at the version it sees."""

    @property
    def identity(self) -> IndexIdentity:
        gen = self.generation
        return IndexIdentity(gen.provider, gen.model, gen.dims, gen.chunker)

    @property
    def _with_vectors(self) -> bool:
        return self.generation.dims > 0

    # -- status -----------------------------------------------------------------------------------------
    def counts(self) -> IndexCounts:
        return pg_vectors.count(self.con, self.generation)

    def file_problems(self) -> list[FileProblem]:
        return pg_vectors.problems(self.con, self.generation)

    def chunk_stats(self, path: str) -> list[ChunkStats]:
        rows = self.con.execute(
            "SELECT c.key, c.start_line, c.end_line, c.heading, c.day, count(r.chunk_key), "
            "(array_agg(ROW(r.query, r.searched_at, r.vector, r.text, r.decay, r.weight, r.score, r.rank) "
            "ORDER BY r.searched_at DESC) FILTER (WHERE r.chunk_key IS NOT NULL))[1] "
            f"FROM {SCHEMA}.chunks c LEFT JOIN {SCHEMA}.retrievals r "
            "ON r.namespace = %s AND r.chunk_key = c.key WHERE c.g = %s AND c.path = %s "
            "GROUP BY c.key, c.start_line, c.end_line, c.heading, c.day ORDER BY c.start_line",
            [self.generation.namespace, self.g, path],
        ).fetchall()
        return [
            ChunkStats(
                key,
                start,
                end,
                heading or "",
                day,
                int(count),
                None if last is None else LastRetrieval.from_fields(last),
            )
            for key, start, end, heading, day, count, last in rows
        ]

    def feedback_tallies(self, keys: Sequence[str]) -> dict[str, Tally]:
        return pg_feedback.tallies(self.con, self.generation.namespace, keys)

    # -- chunks by id --------------------------------------------------------------------------------------
    def records(self, ids: Sequence[int], *, with_vectors: bool = False) -> dict[int, ChunkRecord]:
        """The chunks' rows, their vectors read in the same round trip (in binary) and kept for this
        snapshot: a search asks for the vectors of some of the same chunks next (:meth:`vectors`) --
        those a nearest-neighbour search did not return (unless ``with_vectors``). A vector is ~1.5 KB,
        stored out of line: at 100,000 notes reading a search's 45 candidates' vectors cost ~2 ms of the
        server's time and ~0.9 ms of the client's."""
        if not ids:
            return {}
        known = [] if with_vectors else list(self._near)
        select = _RECORD + (
            ", CASE WHEN id = ANY(%s) THEN NULL ELSE embedding END" if self._with_vectors else ""
        )
        params = [known, self.g, list(ids)] if self._with_vectors else [self.g, list(ids)]
        rows = (
            self.con.cursor(binary=True)
            .execute(f"SELECT {select} FROM {SCHEMA}.chunks WHERE g = %s AND id = ANY(%s)", params)
            .fetchall()
        )
        out = {}
        for row in rows:
            vector = (
                np.asarray(row[10], dtype=np.float32) if self._with_vectors and row[10] is not None else None
            )
            record = _record(row, vector if with_vectors else None)
            out[record.id] = record
            if self._with_vectors and (with_vectors or record.id not in self._near):
                self._read_vectors[record.id] = vector
        return out

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not ids or not self._with_vectors:
            return {}
        read = self._read_vectors
        if all(cid in read for cid in ids):  # with the records, in this snapshot
            return {int(cid): vector for cid in ids if (vector := read[cid]) is not None}
        # In binary: a vector arrives as 4-byte floats, not text to parse (~80 us a vector in Python).
        rows = (
            self.con.cursor(binary=True)
            .execute(
                f"SELECT id, embedding FROM {SCHEMA}.chunks WHERE g = %s AND id = ANY(%s) "
                "AND embedding IS NOT NULL",
                [self.g, list(ids)],
            )
            .fetchall()
        )
        return {int(cid): np.asarray(vector, dtype=np.float32) for cid, vector in rows}

    def chunks_of(self, path: str, *, with_vectors: bool = False) -> list[ChunkRecord]:
        rows = self.con.execute(
            f"SELECT id FROM {SCHEMA}.chunks WHERE g = %s AND path = %s ORDER BY start_line, id",
            [self.g, path],
        ).fetchall()
        ids = [int(row[0]) for row in rows]
        found = self.records(ids, with_vectors=with_vectors)
        return [found[cid] for cid in ids if cid in found]

    def embedded_chunks(self, source: str) -> list[ChunkRecord]:
        return [_record(row, row[10]) for row in self._embedded_rows(source, ", embedding")]

    def nearest_in_other_files(
        self, source: str, comparable: Callable[[ChunkRecord], bool]
    ) -> list[tuple[ChunkRecord, ChunkRecord, float]]:
        kept = [record for record in map(_record, self._embedded_rows(source)) if comparable(record)]
        return pairs_across_files(
            kept, lambda groups: nearest_across_vectors(self.vectors(list(groups)), groups)
        )

    def _embedded_rows(self, source: str, extra: str = "") -> list[tuple[Any, ...]]:
        """The rows of ``source``'s chunks that have a vector, by path and start line (``extra``: more
        columns); none in an index without vectors."""
        if not self._with_vectors:
            return []
        return self.con.execute(
            f"SELECT {_RECORD}{extra} FROM {SCHEMA}.chunks WHERE g = %s AND source = %s "
            "AND embedding IS NOT NULL ORDER BY path, start_line",
            [self.g, source],
        ).fetchall()

    # -- candidates -----------------------------------------------------------------------------------------
    def nearest(
        self, vector: np.ndarray, limit: int, *, within: Sequence[int] | None = None
    ) -> list[VectorHit]:
        if not self._with_vectors or (within is not None and not within):
            return []
        query = np.asarray(vector, dtype=np.float32)
        filtered = (
            isinstance(within, FilteredIds)
            and len(within) > EXACT_FILTERED
            and within.share >= FILTERED_SHARE
        )
        if within is not None and not filtered and len(within) <= EXACT_WITHIN:
            ids = within.tolist() if isinstance(within, FilteredIds) else list(within)
            rows = self.con.execute(  # exact: the ids' rows by primary key, no index on the distance
                f"SELECT id, embedding <=> %s AS d FROM {SCHEMA}.chunks WHERE g = %s AND id = ANY(%s) "
                "AND embedding IS NOT NULL ORDER BY d, id LIMIT %s",
                [query, self.g, ids, int(limit)],
            ).fetchall()
            return self._scored([VectorHit(int(cid), float(d)) for cid, d in rows])
        expr = vector_expression(self.generation.dims)
        breadth = max(HNSW_EF_SEARCH, int(limit))
        if self._hnsw_ef < breadth:  # not set as the snapshot began (or for fewer rows): a round trip
            self.con.execute(
                "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.ef_search', %s, true)",
                [str(breadth)],
            )
            self._hnsw_ef = breadth
        params: dict[str, object] = {"q": query, "limit": int(limit)}
        join, where = "", ""
        if isinstance(within, FilteredIds) and filtered:  # the filter itself, inside the scan
            where, params = f"AND {within.condition}", {**within.params, **params}
            if uses_file_meta(within.condition):
                join = f"LEFT JOIN {SCHEMA}.file_meta m ON m.g = c.g AND m.path = c.path"
        elif within is not None:
            where, params["within"] = "AND c.id = ANY(%(within)s)", list(within)
        # The generation inlined: its partial HNSW index must match at planning. No "embedding IS NOT
        # NULL" here: statistics taken while vectors were pending would steer the planner off the index
        # (the index holds no NULL; without it, pending chunks sort last and are dropped below).
        rows = self.con.execute(
            f"SELECT id, d FROM (SELECT c.id, {expr} <=> %(q)s::vector AS d FROM {SCHEMA}.chunks c {join} "
            f"WHERE c.g = {int(self.g)} {where} ORDER BY d LIMIT %(limit)s) x ORDER BY d, id",
            params,
        ).fetchall()
        return self._scored([VectorHit(int(cid), float(d)) for cid, d in rows if d is not None])

    def _scored(self, hits: list[VectorHit]) -> list[VectorHit]:
        self._near.update(hit.chunk_id for hit in hits)
        return hits

    def keyword_top(
        self, terms: Sequence[str], limit: int, *, within: Sequence[int] | None = None
    ) -> list[KeywordHit]:
        found = pg_terms.search(
            self.con, self.g, terms, limit=limit, only_ids=within, memo=self._memo, known=self._weights,
            on_pruned=self._on_pruned,
        )  # fmt: skip
        return found[:limit]

    def keyword_scores(self, terms: Sequence[str], ids: Sequence[int]) -> list[KeywordHit]:
        return pg_terms.search(
            self.con, self.g, terms, limit=len(ids), only_ids=ids, memo=self._memo, known=self._weights
        )

    def allowed_ids(self, chunk_filter: ChunkFilter) -> FilteredIds:
        return pg_filters.allowed_ids(self.con, self.g, chunk_filter, self._allowed)
