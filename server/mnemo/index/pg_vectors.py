"""GenerationRows: a generation's rows besides files and chunks: the shared embedding cache, pending
vectors claimed for embedding, counts, retrieval statistics and feedback (the base of
:class:`mnemo.index.pg_store.PgStore`, which writes files and chunks).

Chunks still waiting for their vector are claimed with session advisory locks (:meth:`pending_batch`)
and released once the transaction that fills them commits, so two writers (two machines' embedding
threads) never embed the same chunk; a writer that dies releases its claims with its session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg

from mnemo.index import pg_feedback
from mnemo.index.api import FileProblem, IndexCounts, IndexIdentity
from mnemo.index.feedback import FeedbackRow, RetrievedChunk
from mnemo.index.pg_schema import PENDING_ORDER, SCHEMA, Generation
from mnemo.index.writer_api import PendingChunk

CLAIM_LOCK = 0x6D6E6D76  # advisory lock class of chunks claimed for embedding
_RETRIEVAL_TYPES = [
    ("namespace", "text"), ("chunk_key", "text"), ("path", "text"), ("start_line", "integer"),
    ("end_line", "integer"), ("query", "text"), ("searched_at", "timestamp"), ("vector", "double precision"),
    ("text", "double precision"), ("decay", "double precision"), ("weight", "double precision"),
    ("score", "double precision"), ("rank", "integer"),
]  # fmt: skip


def count(con: psycopg.Connection, generation: Generation) -> IndexCounts:
    """Files, chunks, and chunks with / without a vector of ``generation`` (a writer's or a reader's)."""
    row = con.execute(
        f"SELECT (SELECT count(*) FROM {SCHEMA}.files WHERE g = %(g)s), "
        f"(SELECT docs FROM {SCHEMA}.generations WHERE id = %(g)s), "
        f"(SELECT count(*) FROM {SCHEMA}.chunks WHERE g = %(g)s AND embedding IS NULL)",
        {"g": generation.id},
    ).fetchone()
    files, chunks, waiting = (int(v or 0) for v in row) if row else (0, 0, 0)
    if generation.dims == 0:
        return IndexCounts(files, chunks)
    return IndexCounts(files, chunks, chunks - waiting, waiting)


def problems(con: psycopg.Connection, generation: Generation) -> list[FileProblem]:
    """Every file of ``generation`` indexed with a problem, sorted by path (a writer's or a reader's)."""
    rows = con.execute(
        f"SELECT path, problem FROM {SCHEMA}.files WHERE g = %s AND problem IS NOT NULL ORDER BY path",
        [generation.id],
    ).fetchall()
    return [FileProblem(path, problem) for path, problem in rows]


class GenerationRows:
    """Rows of one generation through one connection (guarded by the caller's lock)."""

    def __init__(self, con: psycopg.Connection, generation: Generation) -> None:
        self.con = con
        self.generation = generation
        self.g = generation.id
        self._claimed = False

    @property
    def identity(self) -> IndexIdentity:
        gen = self.generation
        return IndexIdentity(gen.provider, gen.model, gen.dims, gen.chunker)

    @property
    def namespace(self) -> str:
        return self.generation.namespace

    # -- embedding cache (every namespace's, every model's) --------------------------------------------
    def cached_embeddings(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        rows = self.con.execute(
            f"SELECT hash, embedding FROM {SCHEMA}.embedding_cache WHERE provider = %s AND model = %s "
            "AND hash = ANY(%s)",
            [self.identity.provider, self.identity.model, list(hashes)],
        ).fetchall()
        return {digest: np.asarray(vector, dtype=np.float32) for digest, vector in rows}

    def cache_embeddings(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        digests = sorted(items)
        self.con.execute(
            f"INSERT INTO {SCHEMA}.embedding_cache(provider, model, hash, embedding) "
            "SELECT %s, %s, h, e FROM unnest(%s::text[], %s::vector[]) AS u(h, e) ON CONFLICT DO NOTHING",
            [
                self.identity.provider,
                self.identity.model,
                digests,
                [np.asarray(items[d], dtype=np.float32) for d in digests],
            ],
        )

    # -- pending vectors ----------------------------------------------------------------------------------
    def pending_batch(self, limit: int) -> list[PendingChunk]:
        """Up to ``limit`` pending chunks, most useful first, that no other writer has claimed; they stay
        claimed (session advisory locks) until the transaction that fills them commits."""
        self.release_claims()
        rows = self.con.execute(
            f"SELECT id, key, heading, text FROM {SCHEMA}.chunks WHERE g = %s AND embedding IS NULL "
            f"ORDER BY {PENDING_ORDER} LIMIT %s",
            [self.g, int(limit) * 4],
        ).fetchall()
        if not rows:
            return []
        claimed = {
            int(r[0])
            for r in self.con.execute(
                "SELECT id FROM unnest(%s::bigint[]) AS u(id) "
                "WHERE pg_try_advisory_lock(%s, (id %% 2147483647)::integer) LIMIT %s",
                [[int(r[0]) for r in rows], CLAIM_LOCK, int(limit)],
            ).fetchall()
        }
        self._claimed = bool(claimed)
        return [
            PendingChunk(int(cid), key, f"{heading}\n{text}" if heading else text)
            for cid, key, heading, text in rows
            if int(cid) in claimed
        ]

    def release_claims(self) -> None:
        self.con.execute("SELECT pg_advisory_unlock_all()")
        self._claimed = False

    def fill_vectors(self, chunks: Sequence[PendingChunk], vectors: np.ndarray) -> int:
        """Give still-pending ``chunks`` (same id and key) their vectors; returns how many."""
        if not chunks:
            return 0
        assert len(vectors) == len(chunks), "one vector per chunk"
        cur = self.con.execute(
            f"UPDATE {SCHEMA}.chunks c SET embedding = u.e FROM "
            "unnest(%s::bigint[], %s::text[], %s::vector[]) AS u(id, key, e) "
            "WHERE c.id = u.id AND c.key = u.key AND c.g = %s AND c.embedding IS NULL",
            [
                [c.id for c in chunks],
                [c.key for c in chunks],
                [np.asarray(v, dtype=np.float32) for v in vectors],
                self.g,
            ],
        )
        return max(0, cur.rowcount)

    def counts(self) -> IndexCounts:
        return count(self.con, self.generation)

    def file_problems(self) -> list[FileProblem]:
        return problems(self.con, self.generation)

    # -- retrieval statistics ------------------------------------------------------------------------------
    def record_retrievals(self, rows: Sequence[tuple[object, ...]]) -> None:
        """Append search results (values in :data:`mnemo.memory.retrievals.Row` order)."""
        if not rows:
            return
        columns = list(zip(*rows, strict=True))
        self._insert(
            "retrievals", _RETRIEVAL_TYPES, [[self.namespace] * len(rows), *(list(c) for c in columns)]
        )

    def retrieval_table(self) -> None:
        """Nothing to carry over a rebuild: statistics are kept by namespace, whatever the generation."""
        return None

    def restore_retrievals(self, table: object) -> None:
        """See :meth:`retrieval_table`."""

    # -- feedback on chat turns (by namespace, as the statistics) --------------------------------------
    def retrieved_between(
        self, queries: Sequence[str], start: datetime, end: datetime
    ) -> list[RetrievedChunk]:
        return pg_feedback.retrieved_between(self.con, self.namespace, queries, start, end)

    def replace_feedback(self, session_id: str, turn: int, signal: str, rows: Sequence[FeedbackRow]) -> None:
        pg_feedback.replace_turn(self.con, self.namespace, session_id, turn, signal, rows)

    def feedback_turns(self, session_id: str) -> set[tuple[int, str]]:
        return pg_feedback.recorded_turns(self.con, self.namespace, session_id)

    def _insert(self, table: str, types: Sequence[tuple[str, str]], columns: Sequence[Sequence[Any]]) -> None:
        """One INSERT of many rows from column arrays (COPY is refused under row-level security)."""
        names = ", ".join(name for name, _ in types)
        arrays = ", ".join(f"%s::{kind}[]" for _, kind in types)
        self.con.execute(
            f"INSERT INTO {SCHEMA}.{table}({names}) SELECT * FROM unnest({arrays})", list(columns)
        )
