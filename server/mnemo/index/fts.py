"""BM25 over fts tables of mnemo's own, kept current incrementally.

The tables live in the schema DuckDB's fts extension uses (``fts_main_chunks``): ``docs``, ``dict`` and
``stats`` as the extension makes them, and ``postings`` instead of its ``terms``. They index the
pre-tokenised ``chunks.terms`` column (words plus CJK bigrams, see :mod:`mnemo.text.terms`; whitespace
is the only separator, so nothing non-ASCII is dropped), with the extension's Porter stems. The
extension cannot update its index, builds it slowly and its per-row ``match_bm25`` macro is slow, so
mnemo:

- creates the tables itself (:func:`create_empty`), fills them after a bulk load (:func:`rebuild`) with
  Porter stems from :mod:`mnemo.text.stems` (the same libstemmer algorithm as the extension's ``stem``),
  and adds and removes documents in them (tests check them against a fresh ``create_fts_index``). Only
  a writer's first edit loads the extension, for its ``stem`` in SQL; loading it, mostly checking its
  signature, cost ~40 ms of every start before;
- keeps a posting per (term, chunk) with its count and the chunk's length (``postings``), where the
  extension keeps a row per occurrence and a search has to count them and join the lengths: a question
  with "the" read 108,530 rows at 2,000 notes instead of 13,964;
- scores a query set-wise with the extension's BM25 formula (k1 = 1.2, b = 0.75), OR over terms,
  returning the IDF mass of the query terms each chunk covers as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mnemo.index.duckdb_native import duckdb, sql_double, sql_ids, sql_strings
from mnemo.text.stems import porter_stems

SCHEMA = "fts_main_chunks"
K1 = 1.2
B = 0.75

_TABLES = (
    "docs(docid BIGINT, name BIGINT, len BIGINT)",
    "dict(termid BIGINT, term VARCHAR, df BIGINT)",
    "postings(termid BIGINT, name BIGINT, tf INTEGER, len INTEGER)",
    "stats(num_docs BIGINT, avgdl DOUBLE)",
)
"""``docs``, ``dict`` and ``stats`` as ``PRAGMA create_fts_index('chunks', 'id', 'terms', ...)`` makes
them; ``postings``: a term's chunks (``name``: the chunk id, as in ``docs``), how often it occurs in
each (``tf``) and the chunk's length in terms (``len``, as ``docs.len``: a chunk never changes)."""


def create_empty(con: duckdb.DuckDBPyConnection) -> None:
    """The fts schema with empty tables (a previous one dropped)."""
    con.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    con.execute(f"CREATE SCHEMA {SCHEMA}")
    for table in _TABLES:
        con.execute(f"CREATE TABLE {SCHEMA}.{table}")
    con.execute(f"INSERT INTO {SCHEMA}.stats VALUES (0, NULL)")


def rebuild(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the fts tables from ``chunks.terms`` from scratch (after a bulk load; a repair), with what
    ``create_fts_index`` would find, in a sixth of its CPU time (:mod:`mnemo.index.fts_build`); a
    missing or partial schema is made again first (:func:`create_empty`)."""
    from mnemo.index import fts_build  # NumPy and Arrow: loaded by a build only, not by every read

    present = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name IN ?",
        [SCHEMA, list(fts_build.TABLES)],
    ).fetchone()
    if not present or present[0] != len(fts_build.TABLES):
        create_empty(con)
    fts_build.fill(con, SCHEMA)


def _refresh_stats(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        f"UPDATE {SCHEMA}.stats SET num_docs = (SELECT count(*) FROM {SCHEMA}.docs), "
        f"avgdl = coalesce((SELECT avg(len) FROM {SCHEMA}.docs), 0)"
    )


def add_docs(con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> None:
    """Index chunks already inserted into ``chunks`` (same transaction as the insert). Stems in SQL, with
    the extension's ``stem``: ``con`` must have it loaded (:meth:`mnemo.index.store.ChunkStore.insert_chunks`
    does on a writer's first edit). An edit's few tokens handed to Python and back took ~10 ms more."""
    if not ids:
        return
    con.execute(
        "CREATE OR REPLACE TEMP TABLE fts_new_tokens AS "
        "SELECT name, stem(tok, 'porter') AS term FROM ("
        "  SELECT id AS name, unnest(string_split_regex(terms, '\\s+')) AS tok FROM chunks "
        f"  WHERE id IN ({sql_ids(ids)})"
        ") WHERE tok <> ''"
    )
    con.execute(
        f"INSERT INTO {SCHEMA}.docs "
        f"SELECT (SELECT coalesce(max(docid), -1) FROM {SCHEMA}.docs) + row_number() OVER (ORDER BY c.id), "
        "c.id, coalesce(n.len, 0) "
        f"FROM (SELECT unnest([{sql_ids(ids)}]::BIGINT[]) AS id) c "
        "LEFT JOIN (SELECT name, count(*) AS len FROM fts_new_tokens GROUP BY name) n ON n.name = c.id"
    )
    con.execute(
        f"INSERT INTO {SCHEMA}.dict "
        f"SELECT (SELECT coalesce(max(termid), -1) FROM {SCHEMA}.dict) + row_number() OVER (ORDER BY term), "
        "term, 0 FROM (SELECT DISTINCT term FROM fts_new_tokens "
        f"WHERE term NOT IN (SELECT term FROM {SCHEMA}.dict))"
    )
    con.execute(
        f"INSERT INTO {SCHEMA}.postings SELECT k.termid, t.name, count(*), any_value(d.len) "
        f"FROM fts_new_tokens t JOIN {SCHEMA}.docs d ON d.name = t.name "
        f"JOIN {SCHEMA}.dict k ON k.term = t.term GROUP BY k.termid, t.name"
    )
    con.execute(
        f"UPDATE {SCHEMA}.dict SET df = df + x.n FROM "
        "(SELECT term, count(DISTINCT name) AS n FROM fts_new_tokens GROUP BY term) x "
        "WHERE dict.term = x.term"
    )
    con.execute("DROP TABLE fts_new_tokens")
    _refresh_stats(con)


def remove_docs(con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> None:
    """Forget chunks about to be deleted from ``chunks``."""
    if not ids:
        return
    con.execute(f"CREATE OR REPLACE TEMP TABLE fts_gone AS SELECT unnest([{sql_ids(ids)}]::BIGINT[]) AS name")
    con.execute(
        f"UPDATE {SCHEMA}.dict SET df = df - x.n FROM "
        f"(SELECT termid, count(*) AS n FROM {SCHEMA}.postings "
        " WHERE name IN (SELECT name FROM fts_gone) GROUP BY termid) x "
        "WHERE dict.termid = x.termid"
    )
    con.execute(f"DELETE FROM {SCHEMA}.postings WHERE name IN (SELECT name FROM fts_gone)")
    con.execute(f"DELETE FROM {SCHEMA}.docs WHERE name IN (SELECT name FROM fts_gone)")
    con.execute("DROP TABLE fts_gone")
    _refresh_stats(con)


def bm25_idf(num_docs: float, df: float) -> float:
    """BM25's IDF of a term in ``df`` of ``num_docs`` documents (both engines score with it)."""
    return math.log((num_docs - df + 0.5) / (df + 0.5) + 1)


@dataclass(frozen=True)
class QueryWeights:
    idf: dict[int, float]
    """Term id -> IDF, for the query terms some chunk contains."""
    total: float
    """IDF mass of all query terms (unknown terms at the known terms' mean)."""
    avgdl: float


def query_weights(con: duckdb.DuckDBPyConnection, terms: Sequence[str]) -> QueryWeights | None:
    """The query terms' ids and IDF, from one small query (dict, collection statistics). The terms are
    stemmed in Python (:mod:`mnemo.text.stems`, equal to the extension's ``stem``), so a reader needs no
    fts extension loaded."""
    stems = sorted(set(porter_stems(t for t in terms if t).values()))
    if not stems:
        return None
    # Values inlined: DuckDB plans and runs a flat query with constants far faster than list parameters.
    literals = sql_strings(stems)
    # A filter on the dictionary, not a join with the list of terms: ~0.7 against ~1.5 ms at 2,000 notes.
    rows = con.execute(
        f"SELECT d.termid, d.df, s.num_docs, s.avgdl FROM {SCHEMA}.dict d, {SCHEMA}.stats s "
        f"WHERE d.term IN ({literals}) AND d.df > 0"
    ).fetchall()
    known = {int(termid): float(df) for termid, df, _, _ in rows}
    if not known:
        return None
    num_docs, avgdl = float(rows[0][2] or 0), float(rows[0][3] or 0) or 1.0
    idf = {termid: bm25_idf(num_docs, df) for termid, df in known.items()}
    mean_idf = sum(idf.values()) / len(idf)
    return QueryWeights(idf, sum(idf.values()) + (len(stems) - len(known)) * mean_idf, avgdl)


def search(
    con: duckdb.DuckDBPyConnection,
    terms: Sequence[str],
    *,
    limit: int,
    only_ids: Sequence[int] | None = None,
    weights: QueryWeights | None = None,
) -> list[tuple[int, float, float, float]]:
    """(chunk id, bm25, idf mass covered, idf mass of all query terms), best first. ``weights``: the
    terms' :func:`query_weights` when the caller has them already (a second query of the same terms).

    Two queries: the query terms' ids, document frequencies and the collection statistics first
    (:func:`query_weights`); then the postings of just those term ids (inlined as constants, which
    DuckDB scans several times faster than a join against a subquery), scored with the extension's BM25
    (k1 = 1.2, b = 0.75).

    The total IDF mass counts every query term: a term no chunk contains counts at the known terms'
    mean IDF, so a chunk matching one word of a long question covers little of it, while question
    words that notes never use ("what", "does") do not weigh like the rarest term.
    """
    if not terms or (only_ids is not None and not only_ids):
        return []
    weights = weights or query_weights(con, terms)
    if weights is None:
        return []
    idf, total, avgdl = weights.idf, weights.total, weights.avgdl
    values = ", ".join(f"({termid}, {sql_double(weight)})" for termid, weight in idf.items())
    id_list = sql_ids(idf)
    # tf (k1 + 1) / (tf + k1 (1 - b + b len / avgdl)), its constants folded here and written as DOUBLEs:
    # a literal such as 1.2 is a DECIMAL to DuckDB, and DECIMAL arithmetic made this query take twice as
    # long (2,000 notes, a question with "the": ~22 against ~12 ms).
    top, flat, per_len = sql_double(K1 + 1), sql_double(K1 * (1 - B)), sql_double(K1 * B / avgdl)
    # No join: a posting holds its count and its chunk's length; a term's postings sit together.
    sql = (
        "SELECT p.name, "
        f"sum(q.idf * p.tf * {top} / (p.tf + {flat} + {per_len} * p.len)) AS bm25, "
        "sum(q.idf) AS covered "
        f"FROM {SCHEMA}.postings p JOIN (VALUES {values}) q(termid, idf) ON q.termid = p.termid "
        f"WHERE p.termid IN ({id_list}) "
    )
    if only_ids is not None:  # inlined: DuckDB's client converts a list parameter ~25 µs an element
        sql += f"AND p.name IN (SELECT unnest([{sql_ids(only_ids)}]::BIGINT[])) GROUP BY p.name ORDER BY bm25 DESC"
        scored = con.execute(sql).fetchall()
    else:
        sql += f"GROUP BY p.name ORDER BY bm25 DESC LIMIT {int(limit)}"
        scored = con.execute(sql).fetchall()
    return [(int(i), float(b), float(c), total) for i, b, c in scored]
