"""The PostgreSQL engine's schema: versioned migrations and namespace generations.

Everything lives in the ``mnemo`` schema of the database ``MNEMO_PG_DSN`` names. ``migrations`` records
the versions applied; :func:`migrate` applies the missing ones under an advisory lock, so several
processes starting at once apply each exactly once. A migration only ever adds (a newer mnemo never
needs an older one's cooperation, and an older one refuses a database that is ahead of it).

A *namespace* is one shared memory (a team's repository; ``[index] namespace``). Its rows carry the id
of a *generation*: what the index was built with (provider, model, dims, chunker) and its BM25
statistics. One generation per namespace is live; a rebuild for another model fills a new one and
swaps it in one transaction (:func:`swap_generation`), so readers never see a half-built index.
Each generation with vectors has its own HNSW index (a partial index on its id, over the vectors cast
to its dims), so a namespace's nearest-neighbour search never wades through another's vectors.

Tables (``g``: generation id):

- ``generations(id, namespace, live, provider, model, dims, chunker, docs, total_len, version, min_a0)``:
  ``version`` counts the transactions that changed its postings (readers' caches of postings key on it);
  ``min_a0`` is the smallest average length any of its postings' impacts was computed with
- ``files(g, path, kind, source, day, hash, mtime, size, chunks, problem)``
- ``file_meta(g, path, tags, project, type, day)``: front matter for search filters
- ``chunks(id, g, key, path, source, kind, day, start_line, end_line, heading, text, terms, hash, len,
  tsv, embedding)``: ``tsv`` holds the chunk's stemmed terms as a ``tsvector`` (the 'simple' kind: no
  further parsing or stemming), GIN-indexed; ``len`` is its token count (BM25's document length)
- ``postings(g, term, chunk_id, tf, len, imp)``: BM25's inverted lists, one row per (term, chunk); ``imp``
  is the posting's impact (:func:`impact_sql`) for the generation's average length when it was written,
  and a second B-tree reads a term's postings by impact, highest first (:mod:`mnemo.index.pg_terms`)
- ``terms(g, term, df)``: document frequencies
- ``embedding_cache(provider, model, hash, embedding)``: shared by every namespace and machine
- ``retrievals(namespace, chunk_key, ...)``: search statistics, by namespace (they survive rebuilds)
- ``feedback(namespace, chunk_key, session_id, turn, signal, useful, ...)``: feedback on chat turns, by
  namespace too (:mod:`mnemo.index.pg_feedback`)
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import psycopg

from mnemo.errors import IndexUnavailable

log = logging.getLogger(__name__)

SCHEMA = "mnemo"
MIGRATION_LOCK = 0x6D6E656D6F  # "mnemo": the advisory lock migrations run under

IMPACT_K1, IMPACT_B = 1.2, 0.75
"""BM25's k1 and b (:data:`mnemo.index.fts.K1`, :data:`mnemo.index.fts.B`), frozen here: migrations use them."""
AVERAGE_LENGTH = "coalesce(nullif(total_len::float8 / nullif(docs, 0), 0), 1)"
"""A generation's average chunk length, in SQL over its ``docs`` and ``total_len`` (1 when empty), as
:func:`mnemo.index.pg_terms.query_weights` computes it."""


def impact_sql(a0: str, p: str = "") -> str:
    """A posting's *impact*, the tf part of its BM25 score ``tf*(k1+1) / (tf + k1*(1-b+b*len/a0))``
    for the average length ``a0`` (an SQL expression), as a ``real``; ``p``: the postings' alias."""
    return (
        f"({p}tf::float8 * {IMPACT_K1 + 1!r} / ({p}tf::float8 + {IMPACT_K1!r} * ({1 - IMPACT_B!r} + "
        f"{IMPACT_B!r} * {p}len::float8 / ({a0}))))::real"
    )


MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "generations, files, chunks with tsvector and vectors, BM25 postings, embedding cache, retrievals",
        [
            "CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public",  # not in mnemo: on every search_path
            f"""CREATE TABLE {SCHEMA}.generations(
                id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                namespace text NOT NULL, live boolean NOT NULL DEFAULT false,
                provider text NOT NULL, model text NOT NULL, dims integer NOT NULL, chunker text NOT NULL,
                docs bigint NOT NULL DEFAULT 0, total_len bigint NOT NULL DEFAULT 0,
                version bigint NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now())""",
            f"CREATE UNIQUE INDEX generations_live ON {SCHEMA}.generations(namespace) WHERE live",
            f"""CREATE TABLE {SCHEMA}.files(
                g integer NOT NULL REFERENCES {SCHEMA}.generations(id) ON DELETE CASCADE,
                path text NOT NULL, kind text, source text, day date, hash text, mtime double precision,
                size bigint, chunks integer, problem text, PRIMARY KEY(g, path))""",
            f"""CREATE TABLE {SCHEMA}.file_meta(
                g integer NOT NULL REFERENCES {SCHEMA}.generations(id) ON DELETE CASCADE,
                path text NOT NULL, tags text[] NOT NULL DEFAULT '{{}}', project text, type text, day date,
                PRIMARY KEY(g, path))""",
            f"""CREATE TABLE {SCHEMA}.chunks(
                id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                g integer NOT NULL REFERENCES {SCHEMA}.generations(id) ON DELETE CASCADE,
                key text NOT NULL, path text NOT NULL, source text NOT NULL, kind text NOT NULL, day date,
                start_line integer NOT NULL, end_line integer NOT NULL, heading text NOT NULL DEFAULT '',
                text text NOT NULL, terms text NOT NULL, hash text NOT NULL, len integer NOT NULL,
                tsv tsvector NOT NULL, embedding vector,
                prio smallint GENERATED ALWAYS AS (CASE WHEN path IN ('MEMORY.md', 'memory.md') THEN 0
                    WHEN kind = 'session' THEN 3 WHEN day IS NOT NULL THEN 1 ELSE 2 END) STORED)""",
            f"CREATE INDEX chunks_path ON {SCHEMA}.chunks(g, path)",
            f"CREATE INDEX chunks_pending ON {SCHEMA}.chunks(g, prio, day DESC NULLS LAST, path, start_line) "
            "WHERE embedding IS NULL",
            f"CREATE INDEX chunks_tsv ON {SCHEMA}.chunks USING gin(tsv)",
            f"""CREATE TABLE {SCHEMA}.postings(
                g integer NOT NULL, term text NOT NULL, chunk_id bigint NOT NULL, tf integer NOT NULL,
                len integer NOT NULL, PRIMARY KEY(g, term, chunk_id) INCLUDE (tf, len))""",
            f"""CREATE TABLE {SCHEMA}.terms(
                g integer NOT NULL, term text NOT NULL, df bigint NOT NULL, PRIMARY KEY(g, term))""",
            f"""CREATE TABLE {SCHEMA}.embedding_cache(
                provider text NOT NULL, model text NOT NULL, hash text NOT NULL, embedding vector NOT NULL,
                PRIMARY KEY(provider, model, hash))""",
            f"""CREATE TABLE {SCHEMA}.retrievals(
                namespace text NOT NULL, chunk_key text NOT NULL, path text, start_line integer,
                end_line integer, query text, searched_at timestamp, vector double precision,
                text double precision, decay double precision, weight double precision,
                score double precision, rank integer)""",
            f"CREATE INDEX retrievals_key ON {SCHEMA}.retrievals(namespace, chunk_key)",
        ],
    ),
    (
        2,
        "postings ordered by BM25 impact, for a pruned top-k",
        [
            f"ALTER TABLE {SCHEMA}.postings ADD COLUMN imp real",
            f"ALTER TABLE {SCHEMA}.generations ADD COLUMN min_a0 double precision",
            f"UPDATE {SCHEMA}.generations SET min_a0 = {AVERAGE_LENGTH}",
            f"UPDATE {SCHEMA}.postings p SET imp = {impact_sql('g.min_a0', 'p.')} FROM {SCHEMA}.generations g "
            "WHERE g.id = p.g",
            f"ALTER TABLE {SCHEMA}.postings ALTER COLUMN imp SET NOT NULL",
            f"CREATE INDEX postings_impact ON {SCHEMA}.postings(g, term, imp DESC) INCLUDE (chunk_id, tf, len)",
        ],
    ),
    (
        3,
        "feedback on chat turns, by namespace",
        [
            f"""CREATE TABLE {SCHEMA}.feedback(
                namespace text NOT NULL, chunk_key text NOT NULL, path text, start_line integer,
                end_line integer, session_id text NOT NULL, turn integer NOT NULL, useful boolean NOT NULL,
                signal text NOT NULL, given_at timestamp, cited boolean)""",
            f"CREATE INDEX feedback_key ON {SCHEMA}.feedback(namespace, chunk_key)",
            f"CREATE INDEX feedback_turn ON {SCHEMA}.feedback(namespace, session_id, turn, signal)",
            # a turn's chunks are found by the queries its searches ran, in its time span
            f"CREATE INDEX retrievals_query ON {SCHEMA}.retrievals(namespace, query, searched_at)",
        ],
    ),
]
"""(version, what it does, statements). Append only; never edit an applied one."""

LATEST = MIGRATIONS[-1][0]


def migrate(con: psycopg.Connection, upto: int = LATEST) -> int:
    """Bring the schema to :data:`LATEST` (``upto``: that version; tests) in one transaction under an
    advisory lock; returns the version found before. A database ahead of this mnemo is refused. A
    current schema is only read (a member role without CREATE on the database connects fine)."""
    found = _applied(con)
    if found >= upto and found <= LATEST:
        return found
    with con.transaction():
        con.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.migrations(version integer PRIMARY KEY, "
            "note text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        found = _applied(con)
        if found > LATEST:
            raise IndexUnavailable(
                f"the PostgreSQL index is at schema version {found}, newer than this mnemo ({LATEST}); "
                "upgrade mnemo"
            )
        for version, note, statements in MIGRATIONS:
            if version <= found or version > upto:
                continue
            for statement in statements:
                con.execute(statement)
            con.execute(f"INSERT INTO {SCHEMA}.migrations(version, note) VALUES (%s, %s)", [version, note])
            log.info("PostgreSQL index: applied migration %d (%s)", version, note)
    if found < 2 <= upto and not con.info.transaction_status:  # rewritten postings: index-only scans again
        with contextlib.suppress(psycopg.Error):
            con.execute(f"VACUUM (ANALYZE) {SCHEMA}.postings")
    return found


def _applied(con: psycopg.Connection) -> int:
    """The latest migration applied (0: none, no schema yet)."""
    exists = con.execute("SELECT to_regclass(%s)", [f"{SCHEMA}.migrations"]).fetchone()
    if not exists or exists[0] is None:
        return 0
    row = con.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.migrations").fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class Generation:
    id: int
    namespace: str
    provider: str
    model: str
    dims: int
    chunker: str
    live: bool
    version: int = 0
    """Its postings version when read (moves on with every transaction that changes its postings)."""


_GENERATION = "id, namespace, provider, model, dims, chunker, live, version"


def _generation(row: tuple[object, ...] | None) -> Generation | None:
    if row is None:
        return None
    gid, namespace, provider, model, dims, chunker, live, version = row
    return Generation(
        int(str(gid)),
        str(namespace),
        str(provider),
        str(model),
        int(str(dims)),
        str(chunker),
        bool(live),
        int(str(version)),
    )


def live_generation(con: psycopg.Connection, namespace: str) -> Generation | None:
    row = con.execute(
        f"SELECT {_GENERATION} FROM {SCHEMA}.generations WHERE namespace = %s AND live", [namespace]
    ).fetchone()
    return _generation(row)


def hnsw_index_name(generation: int) -> str:
    return f"chunks_hnsw_g{int(generation)}"


def vector_expression(dims: int) -> str:
    """The indexed expression of a generation's vectors (the HNSW index and its queries must match)."""
    return f"(embedding::vector({int(dims)}))"


PENDING_ORDER = "prio, day DESC NULLS LAST, path, start_line"
"""Which pending chunks are embedded first (:data:`mnemo.index.pending.PRIORITY`: MEMORY.md, dated notes
newest first, undated notes and skills, transcripts), in the order of the ``chunks_pending`` index."""


def create_generation(
    con: psycopg.Connection, namespace: str, provider: str, model: str, dims: int, chunker: str, *, live: bool
) -> Generation:
    """A new, empty generation. Run in a transaction that holds the namespace's lock
    (:func:`namespace_lock`). Its HNSW index comes later (:func:`ensure_vector_index`)."""
    row = con.execute(
        f"INSERT INTO {SCHEMA}.generations(namespace, live, provider, model, dims, chunker) "
        f"VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_GENERATION}",
        [namespace, live, provider, model, dims, chunker],
    ).fetchone()
    made = _generation(row)
    assert made is not None
    return made


VECTOR_INDEX_LOCK = 0x6D6E6869  # advisory lock class: one process builds a generation's HNSW index


def has_vector_index(con: psycopg.Connection, generation: int) -> bool:
    """Whether the generation's HNSW index exists and is valid (a concurrent build in progress, or one
    killed midway, leaves an invalid index)."""
    row = con.execute(
        "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        [SCHEMA, hnsw_index_name(generation)],
    ).fetchone()
    return bool(row and row[0])


def ensure_vector_index(con: psycopg.Connection, generation: Generation) -> bool:
    """Build the generation's HNSW index once its vectors are in (one bulk build is many times faster than
    growing the index row by row during a build); CONCURRENTLY, so writers of every namespace go on
    meanwhile. Until it exists, nearest neighbours are found by an exact scan. ``con`` must be in
    autocommit mode outside a transaction. Returns whether it was built here."""
    if generation.dims <= 0 or has_vector_index(con, generation.id):
        return False
    got = con.execute("SELECT pg_try_advisory_lock(%s, %s)", [VECTOR_INDEX_LOCK, generation.id]).fetchone()
    if not (got and got[0]):
        return False  # another process is building it
    name = hnsw_index_name(generation.id)
    try:
        if has_vector_index(con, generation.id):
            return False
        con.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SCHEMA}.{name}")  # invalid: a killed build's
        con.execute(
            f"CREATE INDEX CONCURRENTLY {name} ON {SCHEMA}.chunks "
            f"USING hnsw ({vector_expression(generation.dims)} vector_cosine_ops) WHERE g = {generation.id}"
        )
        with contextlib.suppress(psycopg.Error):  # statistics taken while the vectors were pending
            con.execute(f"ANALYZE {SCHEMA}.chunks")
        return True
    finally:
        con.execute("SELECT pg_advisory_unlock(%s, %s)", [VECTOR_INDEX_LOCK, generation.id])


def namespace_lock(con: psycopg.Connection, namespace: str) -> None:
    """Take the namespace's write lock until the transaction ends. Every write of a namespace's rows
    holds it: BM25 statistics (document frequencies, totals) change in one order, and two writers of the
    same file cannot interleave. Readers take no lock (they read a snapshot)."""
    con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [MIGRATION_LOCK & 0x7FFFFFFF, namespace])


def swap_generation(con: psycopg.Connection, namespace: str, new: int) -> int | None:
    """Make generation ``new`` the namespace's live one and delete the one it replaces (its rows go
    with it); returns the old id. Run in a transaction holding the namespace's lock."""
    old = live_generation(con, namespace)
    if old is not None:
        con.execute(f"UPDATE {SCHEMA}.generations SET live = false WHERE id = %s", [old.id])
    con.execute(f"UPDATE {SCHEMA}.generations SET live = true WHERE id = %s", [new])
    if old is not None and old.id != new:
        drop_generation(con, old.id)
        return old.id
    return None


def drop_generation(con: psycopg.Connection, generation: int) -> None:
    """Delete a generation: its postings and terms (no foreign key: they are the hot tables), then the
    generation row, whose files, metadata and chunks go by cascade, and its HNSW index."""
    con.execute(f"DELETE FROM {SCHEMA}.postings WHERE g = %s", [generation])
    con.execute(f"DELETE FROM {SCHEMA}.terms WHERE g = %s", [generation])
    con.execute(f"DELETE FROM {SCHEMA}.generations WHERE id = %s", [generation])
    found = con.execute("SELECT to_regclass(%s)", [f"{SCHEMA}.{hnsw_index_name(generation)}"]).fetchone()
    if found and found[0] is not None:
        try:
            with con.transaction():  # a savepoint: a role that does not own the table cannot drop it
                con.execute(f"DROP INDEX IF EXISTS {SCHEMA}.{hnsw_index_name(generation)}")
        except psycopg.errors.InsufficientPrivilege:
            log.warning("the HNSW index of an old generation stays until the owner drops it (empty, unused)")


def stale_generations(con: psycopg.Connection, namespace: str) -> list[int]:
    """Generations of ``namespace`` that are not live (a rebuild killed before its swap)."""
    rows = con.execute(
        f"SELECT id FROM {SCHEMA}.generations WHERE namespace = %s AND NOT live ORDER BY id", [namespace]
    ).fetchall()
    return [int(r[0]) for r in rows]
