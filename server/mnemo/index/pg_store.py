"""PgStore: the writer's side of the PostgreSQL engine (:class:`mnemo.index.writer_api.IndexWriter`).

Several writers (editors, gateways, ``mnemo index`` on several machines) may share one database. Every
write runs in a transaction that first takes the namespace's advisory lock
(:func:`mnemo.index.pg_schema.namespace_lock`), so BM25 statistics change in one order and two writers
of one file never interleave; readers take no lock. A file is replaced in one transaction
(:meth:`PgStore.replace_file`) that decides what to keep, delete and insert from what is committed at
that moment, and does nothing when the committed content hash is already the new one: two machines
indexing the same commit do the work once. The embedding cache, pending vectors (claimed, so two
embedding threads never embed the same chunk) and statistics: :mod:`mnemo.index.pg_vectors`.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from mnemo.index.pg_schema import AVERAGE_LENGTH, SCHEMA, impact_sql, namespace_lock
from mnemo.index.pg_terms import chunk_terms
from mnemo.index.pg_vectors import GenerationRows
from mnemo.index.writer_api import ChunkRow, ChunkSlot, FileMeta, FileState

_CHUNK_TYPES = [
    ("id", "bigint"), ("g", "integer"), ("key", "text"), ("path", "text"), ("source", "text"), ("kind", "text"),
    ("day", "date"), ("start_line", "integer"), ("end_line", "integer"), ("heading", "text"), ("text", "text"),
    ("terms", "text"), ("hash", "text"), ("len", "integer"), ("tsv", "tsvector"), ("embedding", "vector"),
]  # fmt: skip
_FILE_TYPES = [
    ("g", "integer"), ("path", "text"), ("kind", "text"), ("source", "text"), ("day", "date"), ("hash", "text"),
    ("mtime", "double precision"), ("size", "bigint"), ("chunks", "integer"), ("problem", "text"),
]  # fmt: skip


@dataclass(frozen=True)
class FileWrite:
    """One file's new state, prepared outside the transaction (:meth:`PgStore.replace_file`)."""

    path: str
    kind: str
    source: str
    day: str | None
    digest: str
    mtime: float
    size: int
    problem: str | None
    meta: FileMeta
    rows: Sequence[ChunkRow]
    vectors: Mapping[str, np.ndarray]
    """Known vectors by chunk key (the embedding cache's, or just embedded); the others are written pending."""


@dataclass(frozen=True)
class FileOutcome:
    written: bool
    """False: the committed file already had this content (another writer did it)."""
    kept: int = 0
    inserted: int = 0
    pending: int = 0


class PgStore(GenerationRows):
    """A namespace's live generation, written through one connection (guarded by the caller's lock)."""

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """Commit on exit, roll back on an exception; holds the namespace's write lock throughout."""
        with self.con.transaction():
            namespace_lock(self.con, self.namespace)
            yield self.con
        if self._claimed:  # claims end once their vectors are committed (or the batch was dropped)
            self.release_claims()

    # -- files --------------------------------------------------------------------------------------
    def file_states(self) -> dict[str, FileState]:
        rows = self.con.execute(
            f"SELECT path, hash, mtime, size FROM {SCHEMA}.files WHERE g = %s", [self.g]
        ).fetchall()
        return {path: FileState(digest or "", float(mtime), int(size)) for path, digest, mtime, size in rows}

    def chunk_keys(self, path: str) -> dict[str, ChunkSlot]:
        rows = self.con.execute(
            f"SELECT key, id, embedding IS NOT NULL FROM {SCHEMA}.chunks WHERE g = %s AND path = %s",
            [self.g, path],
        ).fetchall()
        return {key: ChunkSlot(int(cid), bool(has)) for key, cid, has in rows}

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
        self.con.execute(
            f"INSERT INTO {SCHEMA}.files(g, path, kind, source, day, hash, mtime, size, chunks, problem) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (g, path) DO UPDATE SET "
            "kind = EXCLUDED.kind, source = EXCLUDED.source, day = EXCLUDED.day, hash = EXCLUDED.hash, "
            "mtime = EXCLUDED.mtime, size = EXCLUDED.size, chunks = EXCLUDED.chunks, problem = EXCLUDED.problem",
            [self.g, path, kind, source, day, digest, mtime, size, chunks, problem],
        )

    def touch_files(self, stamps: Sequence[tuple[str, float, int]]) -> None:
        for path, mtime, size in stamps:
            self.con.execute(
                f"UPDATE {SCHEMA}.files SET mtime = %s, size = %s WHERE g = %s AND path = %s",
                [mtime, size, self.g, path],
            )

    def delete_file(self, path: str) -> None:
        ids = [
            int(r[0])
            for r in self.con.execute(
                f"SELECT id FROM {SCHEMA}.chunks WHERE g = %s AND path = %s", [self.g, path]
            ).fetchall()
        ]
        self.delete_chunks(ids)
        self.con.execute(f"DELETE FROM {SCHEMA}.files WHERE g = %s AND path = %s", [self.g, path])
        self.con.execute(f"DELETE FROM {SCHEMA}.file_meta WHERE g = %s AND path = %s", [self.g, path])

    def delete_chunks(self, ids: Sequence[int]) -> None:
        """Delete chunks with their postings, lowering document frequencies and the totals (one statement)."""
        if not ids:
            return
        self.con.execute(
            f"WITH gone AS (DELETE FROM {SCHEMA}.chunks WHERE g = %(g)s AND id = ANY(%(ids)s) "
            "RETURNING id, len, tsv), "
            "t AS (SELECT id, unnest(tsvector_to_array(tsv)) AS term FROM gone), "
            f"p AS (DELETE FROM {SCHEMA}.postings x USING t WHERE x.g = %(g)s AND x.term = t.term "
            "AND x.chunk_id = t.id), "
            f"d AS (UPDATE {SCHEMA}.terms SET df = terms.df - c.n FROM "
            "(SELECT term, count(*) AS n FROM t GROUP BY term) c WHERE terms.g = %(g)s AND terms.term = c.term) "
            f"UPDATE {SCHEMA}.generations SET docs = docs - (SELECT count(*) FROM gone), "
            "total_len = total_len - (SELECT coalesce(sum(len), 0) FROM gone), version = version + 1 WHERE id = %(g)s",
            {"g": self.g, "ids": list(ids)},
        )

    def move_chunks(self, moves: Sequence[tuple[int, int, int]]) -> None:
        if not moves:
            return
        ids, starts, ends = (list(col) for col in zip(*moves, strict=True))
        self.con.execute(
            f"UPDATE {SCHEMA}.chunks c SET start_line = m.s, end_line = m.e FROM "
            "unnest(%s::bigint[], %s::int[], %s::int[]) AS m(id, s, e) WHERE c.id = m.id AND c.g = %s",
            [ids, starts, ends, self.g],
        )

    def insert_chunks(
        self,
        rows: Sequence[ChunkRow],
        vectors: np.ndarray | None,
        *,
        live: bool = True,
        pending: Sequence[bool] = (),
    ) -> None:
        """Add chunks, their postings, document frequencies and totals (searchable at commit whatever
        ``live`` says: PostgreSQL keeps its indexes current). Rows marked ``pending`` get no vector."""
        if not rows:
            return
        dims = self.identity.dims
        if dims > 0:
            assert vectors is not None and vectors.shape == (len(rows), dims)
        got = self.con.execute(
            f"SELECT nextval(pg_get_serial_sequence('{SCHEMA}.chunks', 'id')) FROM generate_series(1, %s)",
            [len(rows)],
        ).fetchall()
        ids = [int(r[0]) for r in got]
        terms = chunk_terms([r.terms for r in rows])
        waiting = list(pending) or [False] * len(rows)
        vectors_in = [
            None if dims == 0 or vectors is None or waiting[i] else np.asarray(vectors[i], dtype=np.float32)
            for i in range(len(rows))
        ]
        self._insert(
            "chunks",
            _CHUNK_TYPES,
            [ids, [self.g] * len(rows), [r.key for r in rows], [r.path for r in rows], [r.source for r in rows],
             [r.kind for r in rows], [r.day for r in rows], [r.start_line for r in rows],
             [r.end_line for r in rows], [r.heading for r in rows], [r.text for r in rows],
             [r.terms for r in rows], [r.hash for r in rows], [t.length for t in terms],
             [t.tsvector() for t in terms], vectors_in],
        )  # fmt: skip
        post_terms, post_ids, post_tf, post_len = [], [], [], []
        for cid, t in zip(ids, terms, strict=True):
            for term, tf in t.tf.items():
                post_terms.append(term)
                post_ids.append(cid)
                post_tf.append(tf)
                post_len.append(t.length)
        # Impacts for the average length with these chunks in (the lowest ever used is kept in min_a0)
        got_a0 = self.con.execute(
            f"UPDATE {SCHEMA}.generations SET docs = docs + %(n)s, total_len = total_len + %(len)s, "
            "version = version + 1, min_a0 = least(min_a0, coalesce(nullif((total_len + %(len)s)::float8 / "
            f"nullif(docs + %(n)s, 0), 0), 1)) WHERE id = %(g)s RETURNING {AVERAGE_LENGTH}",
            {"n": len(rows), "len": sum(t.length for t in terms), "g": self.g},
        ).fetchone()
        a0 = float(got_a0[0]) if got_a0 else 1.0
        self.con.execute(
            f"INSERT INTO {SCHEMA}.postings(g, term, chunk_id, tf, len, imp) SELECT %s, u.*, "
            f"{impact_sql('%s::float8', 'u.')} FROM "
            "unnest(%s::text[], %s::bigint[], %s::integer[], %s::integer[]) AS u(term, chunk_id, tf, len)",
            [self.g, a0, post_terms, post_ids, post_tf, post_len],
        )
        df = Counter(term for t in terms for term in t.tf)
        ordered = sorted(df)
        self.con.execute(
            f"INSERT INTO {SCHEMA}.terms(g, term, df) SELECT %s, term, n FROM unnest(%s::text[], %s::bigint[]) "
            "AS d(term, n) ON CONFLICT (g, term) DO UPDATE SET df = terms.df + EXCLUDED.df",
            [self.g, ordered, [df[t] for t in ordered]],
        )

    def write_meta(self, path: str, meta: FileMeta) -> None:
        """Upsert a file's front matter; a change moves the generation's version on (front matter is not
        chunked: an edit of it alone changes no posting, but it changes what a filter allows, and
        processes keep filters' ids by version, :mod:`mnemo.index.pg_filters`)."""
        changed = self.con.execute(
            f"INSERT INTO {SCHEMA}.file_meta AS f(g, path, tags, project, type, day) "
            "VALUES (%s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (g, path) DO UPDATE SET tags = EXCLUDED.tags, project = EXCLUDED.project, "
            "type = EXCLUDED.type, day = EXCLUDED.day WHERE (f.tags, f.project, f.type, f.day) "
            "IS DISTINCT FROM (EXCLUDED.tags, EXCLUDED.project, EXCLUDED.type, EXCLUDED.day)",
            [self.g, path, list(meta.tags), meta.project, meta.type, meta.day],
        ).rowcount
        if changed:
            self.con.execute(f"UPDATE {SCHEMA}.generations SET version = version + 1 WHERE id = %s", [self.g])

    def meta_paths(self) -> set[str]:
        rows = self.con.execute(f"SELECT path FROM {SCHEMA}.file_meta WHERE g = %s", [self.g]).fetchall()
        return {str(r[0]) for r in rows}

    # -- one file, atomically ---------------------------------------------------------------------------
    def replace_file(self, new: FileWrite) -> FileOutcome:
        """Make ``new`` the committed state of its file in one transaction: nothing when the committed
        hash is already ``new.digest`` (the mtime and size are updated); else chunks whose key is
        committed are kept (moved), the others inserted, the rest deleted. Decided under the namespace
        lock from committed rows, so concurrent writers neither lose nor duplicate chunks."""
        with self.transaction():
            row = self.con.execute(
                f"SELECT hash, chunks FROM {SCHEMA}.files WHERE g = %s AND path = %s", [self.g, new.path]
            ).fetchone()
            if row is not None and row[0] == new.digest and row[1] == len(new.rows):
                self.touch_files([(new.path, new.mtime, new.size)])
                return FileOutcome(written=False)
            existing = self.chunk_keys(new.path)
            kept: list[tuple[int, int, int]] = []
            fresh: list[ChunkRow] = []
            for chunk in new.rows:
                slot = existing.pop(chunk.key, None)
                if slot is not None and (slot.has_vector or chunk.key not in new.vectors):
                    kept.append((slot.id, chunk.start_line, chunk.end_line))
                else:
                    if slot is not None:
                        existing[chunk.key] = slot
                    fresh.append(chunk)
            self.delete_chunks([slot.id for slot in existing.values()])
            self.move_chunks(kept)
            matrix, waiting = self._vectors_of(fresh, new.vectors)
            self.insert_chunks(fresh, matrix, pending=waiting)
            self.upsert_file(
                new.path, new.kind, new.source, new.day, new.digest, new.mtime, new.size, len(new.rows),
                new.problem,
            )  # fmt: skip
            self.write_meta(new.path, new.meta)
        return FileOutcome(True, len(kept), len(fresh), sum(waiting))

    def write_batch(self, files: Sequence[FileWrite]) -> int:
        """Write many files of a generation nobody else writes yet (a build) in one transaction, with
        one statement per table; returns the chunks left pending."""
        rows = [row for f in files for row in f.rows]
        known: dict[str, np.ndarray] = {}
        for f in files:
            known.update(f.vectors)
        matrix, waiting = self._vectors_of(rows, known)
        with self.transaction():
            self.insert_chunks(rows, matrix, pending=waiting)
            self._insert(
                "files",
                _FILE_TYPES,
                [[self.g] * len(files), [f.path for f in files], [f.kind for f in files],
                 [f.source for f in files], [f.day for f in files], [f.digest for f in files],
                 [f.mtime for f in files], [f.size for f in files], [len(f.rows) for f in files],
                 [f.problem for f in files]],
            )  # fmt: skip
            self.con.execute(  # tags joined by US (0x1f): unnest cannot give one array per row
                f"INSERT INTO {SCHEMA}.file_meta(g, path, tags, project, type, day) SELECT %s, p, "
                "CASE WHEN t = '' THEN '{}'::text[] ELSE string_to_array(t, chr(31)) END, pr, ty, d "
                "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::date[]) AS u(p, t, pr, ty, d)",
                [self.g, [f.path for f in files], [chr(31).join(f.meta.tags) for f in files],
                 [f.meta.project for f in files], [f.meta.type for f in files], [f.meta.day for f in files]],
            )  # fmt: skip
        return sum(waiting)

    def _vectors_of(
        self, rows: Sequence[ChunkRow], known: Mapping[str, np.ndarray]
    ) -> tuple[np.ndarray | None, list[bool]]:
        dims = self.identity.dims
        if dims == 0:
            return None, [False] * len(rows)
        matrix = np.zeros((len(rows), dims), dtype=np.float32)
        waiting = []
        for i, row in enumerate(rows):
            vector = known.get(row.key)
            waiting.append(vector is None)
            if vector is not None:
                matrix[i] = vector
        return matrix, waiting
