"""BM25 on PostgreSQL from our own term statistics, with the same terms and formula as the DuckDB engine.

A chunk's ``terms`` (:func:`mnemo.text.terms.terms_string`: words, identifier parts, CJK bigrams) are
Porter-stemmed by the very function DuckDB's fts extension uses (an in-memory DuckDB, stems cached), so
both engines index the same terms and score them alike; the database needs no text search
configuration of its own (PostgreSQL's 'simple' parsing would split our terms again, and its stemmers
differ). What is stored per generation:

- ``chunks.tsv``: the chunk's distinct stems as a ``tsvector`` (GIN), ``chunks.len`` its token count;
- ``postings(term, chunk_id, tf, len)``: one row per stem and chunk, the B-tree on (g, term, chunk_id)
  with tf and len included, so a query's postings are read by an index-only scan;
- ``terms(term, df)`` and the generation's ``docs`` and ``total_len``: IDF and average length.

A query is scored set-wise, OR over its terms, with k1 = 1.2 and b = 0.75, returning as DuckDB's
:func:`mnemo.index.fts.search` does the IDF mass each chunk covers and the IDF mass of every query term
(an unknown term counts at the known terms' mean IDF).
"""

from __future__ import annotations

import math
import struct
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import psycopg
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format

from mnemo.index.api import KeywordHit
from mnemo.index.duck import connect
from mnemo.index.fts import K1, B
from mnemo.index.pg_schema import SCHEMA
from mnemo.index.postings import best_first

EMPTY_STEM = "\u2205"
"""Stands for the empty stem (Porter stems "s", as in "it's", to nothing; a tsvector cannot hold an
empty lexeme). No term is ever "∅" (terms are letters, marks, digits, underscores), so BM25 is unchanged."""
STEM_CACHE_LIMIT = 500_000
"""Distinct terms whose stems are kept in memory (a notes vocabulary; CJK bigrams included)."""


class PorterStems:
    """Porter stems exactly as DuckDB's fts extension computes them (``stem(term, 'porter')``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._cache: dict[str, str] = {}

    def of(self, terms: Iterable[str]) -> dict[str, str]:
        """term -> stem for every term given."""
        wanted = set(terms)
        with self._lock:
            missing = [t for t in wanted if t not in self._cache]
            if missing:
                if self._con is None:
                    self._con = connect(":memory:", vss=False)
                rows = self._con.execute(
                    "SELECT t, stem(t, 'porter') FROM unnest(?::VARCHAR[]) u(t)", [missing]
                ).fetchall()
                if len(self._cache) + len(rows) > STEM_CACHE_LIMIT:
                    self._cache.clear()
                self._cache.update((term, stem or EMPTY_STEM) for term, stem in rows)
            return {t: self._cache[t] for t in wanted}


STEMS = PorterStems()


@dataclass(frozen=True)
class ChunkTerms:
    """A chunk's stems with their frequencies, and its length in tokens."""

    tf: dict[str, int]
    length: int

    def tsvector(self) -> str:
        """The distinct stems as a ``tsvector`` literal (each lexeme quoted: no parsing, no stemming)."""
        return " ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in sorted(self.tf))


def chunk_terms(terms_strings: Sequence[str]) -> list[ChunkTerms]:
    """Stems and frequencies of each chunk's ``terms`` column value."""
    tokens = [s.split() for s in terms_strings]
    stems = STEMS.of(t for toks in tokens for t in toks)
    return [ChunkTerms(dict(Counter(stems[t] for t in toks)), len(toks)) for toks in tokens]


def _idf(num_docs: float, df: float) -> float:
    return math.log((num_docs - df + 0.5) / (df + 0.5) + 1)


@dataclass(frozen=True)
class QueryWeights:
    idf: dict[str, float]
    """Stem -> IDF, for the query's stems some chunk contains."""
    total: float
    avgdl: float
    version: int = 0
    """The generation's postings version these statistics (and any postings read with them) belong to."""


def query_weights(con: psycopg.Connection, generation: int, terms: Sequence[str]) -> QueryWeights | None:
    """The query's stems, their IDF and the collection statistics, from one small query."""
    stems = sorted(set(STEMS.of(t for t in terms if t).values()))
    if not stems:
        return None
    rows = con.execute(
        f"SELECT t.term, t.df, g.docs, g.total_len, g.version FROM {SCHEMA}.generations g "
        f"LEFT JOIN {SCHEMA}.terms t ON t.g = g.id AND t.term = ANY(%s) AND t.df > 0 WHERE g.id = %s",
        [stems, generation],
    ).fetchall()
    if not rows:
        return None
    num_docs, total_len = float(rows[0][2] or 0), float(rows[0][3] or 0)
    known = {str(term): float(df) for term, df, _, _, _ in rows if term is not None}
    if not known:
        return None
    idf = {term: _idf(num_docs, df) for term, df in known.items()}
    mean_idf = sum(idf.values()) / len(idf)
    avgdl = (total_len / num_docs if num_docs else 0.0) or 1.0
    total = sum(idf.values()) + (len(stems) - len(known)) * mean_idf
    return QueryWeights(idf, total, avgdl, int(rows[0][4]))


DENSE_SPAN_FACTOR = 8
SQL_SCORED_IDS = 2_000
"""``only_ids`` up to this many are scored in SQL (their postings by key); more, like a top-k, in NumPy."""


class _IntArray(Loader):
    """A binary ``int8[]``/``int4[]`` (one dimension, no NULLs) as an int64 NumPy array, without a Python
    object per element (a common term's postings run to tens of thousands)."""

    format = Format.BINARY
    element = ">i8"

    def load(self, data: Buffer) -> np.ndarray:
        buf = bytes(data)
        ndim = struct.unpack_from(">i", buf, 0)[0]
        if ndim == 0:
            return np.zeros(0, np.int64)
        count = struct.unpack_from(">i", buf, 12)[0]
        items = np.frombuffer(buf, np.dtype([("size", ">i4"), ("value", self.element)]), count, 12 + 8 * ndim)
        return items["value"].astype(np.int64)


class _Int4Array(_IntArray):
    element = ">i4"


_INT8_ARRAY, _INT4_ARRAY = 1016, 1007  # built-in type oids


Postings = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A term's chunk ids, term frequencies and chunk lengths."""


class PostingsMemo:
    """A process's recently used postings, by (generation, term), valid for one postings version.

    Searches share most of their words ("the", a project's name), and a common word's postings run to
    tens of thousands of rows: kept here, a repeated word costs nothing until a write changes the
    generation's postings (any write: the version is per generation). At most ``capacity`` postings
    are kept (16 bytes each: 8 million, ~130 MB), the least recently used dropped first."""

    def __init__(self, capacity: int = 8_000_000) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[int, str], tuple[int, Postings]] = OrderedDict()
        self._size = 0

    def get(self, generation: int, version: int, term: str) -> Postings | None:
        with self._lock:
            found = self._items.get((generation, term))
            if found is None or found[0] != version:
                return None
            self._items.move_to_end((generation, term))
            return found[1]

    def put(self, generation: int, version: int, term: str, postings: Postings) -> None:
        size = len(postings[0])
        if size > self.capacity // 2:
            return  # one huge list would push out everything else
        with self._lock:
            old = self._items.pop((generation, term), None)
            if old is not None:
                self._size -= len(old[1][0])
            self._items[(generation, term)] = (version, postings)
            self._size += size
            while self._size > self.capacity and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self._size -= len(dropped[0])


def _postings(
    con: psycopg.Connection, generation: int, weights: QueryWeights, memo: PostingsMemo | None
) -> dict[str, Postings]:
    """term -> (chunk ids, tf, len) of the query terms' postings: from ``memo`` when it has them at this
    version, else read by one index-only scan per term."""
    out: dict[str, Postings] = {}
    missing = []
    for term in weights.idf:
        found = memo.get(generation, weights.version, term) if memo is not None else None
        if found is None:
            missing.append(term)
        else:
            out[term] = found
    if missing:
        for term, postings in _read_postings(con, generation, missing).items():
            out[term] = postings
            if memo is not None:
                memo.put(generation, weights.version, term, postings)
    return out


def _read_postings(con: psycopg.Connection, generation: int, terms: Sequence[str]) -> dict[str, Postings]:
    cur = con.cursor(binary=True)
    cur.adapters.register_loader(_INT8_ARRAY, _IntArray)
    cur.adapters.register_loader(_INT4_ARRAY, _Int4Array)
    rows = cur.execute(
        "SELECT p.term, array_agg(p.chunk_id), array_agg(p.tf), array_agg(p.len) "
        f"FROM {SCHEMA}.postings p WHERE p.g = %s AND p.term = ANY(%s) GROUP BY p.term",
        [generation, list(terms)],
    ).fetchall()
    return {str(term): (ids, tfs.astype(np.int32), lens.astype(np.int32)) for term, ids, tfs, lens in rows}


def _scored_sql() -> str:
    return (
        f"SELECT p.chunk_id, sum(q.idf * p.tf::float8 * {K1 + 1!r}::float8 / (p.tf::float8 + "
        f"{K1!r}::float8 * ({1 - B!r}::float8 + {B!r}::float8 * p.len::float8 / %(avgdl)s::float8))) AS bm25, "
        "sum(q.idf) AS covered FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) AS q(term, idf) "
        f"JOIN {SCHEMA}.postings p ON p.g = %(g)s AND p.term = q.term AND p.chunk_id = ANY(%(ids)s::bigint[]) "
        "GROUP BY p.chunk_id ORDER BY bm25 DESC, p.chunk_id"
    )


def _per_chunk(
    ids: np.ndarray, bm25: np.ndarray, per_posting: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunk ids, BM25, covered IDF) summed per chunk. A generation's chunk ids are dense, so a
    counting array indexed by id does it without sorting the postings (10x faster than ``np.unique``
    on a million postings); ids spread wider than that fall back to sorting."""
    lo = int(ids.min())
    span = int(ids.max()) - lo + 1
    if span > max(DENSE_SPAN_FACTOR * len(ids), 1 << 20):
        unique, inverse = np.unique(ids, return_inverse=True)
        return unique, np.bincount(inverse, weights=bm25), np.bincount(inverse, weights=per_posting)
    at = ids - lo
    scores = np.bincount(at, weights=bm25, minlength=span)
    covered = np.bincount(at, weights=per_posting, minlength=span)
    present = np.flatnonzero(covered > 0)  # every IDF is > 0
    return present + lo, scores[present], covered[present]


def _score(
    weights: QueryWeights,
    postings: dict[str, Postings],
    limit: int,
    only_ids: Sequence[int] | None,
) -> list[tuple[int, float, float]]:
    """BM25 of every chunk in ``postings`` as :class:`mnemo.index.postings.PostingsCache` computes it."""
    parts = [(postings[t], idf) for t, idf in weights.idf.items() if t in postings]
    if not parts:
        return []
    ids = np.concatenate([p[0] for p, _ in parts])
    tfs = np.concatenate([p[1] for p, _ in parts]).astype(np.float64)
    length = np.concatenate([p[2] for p, _ in parts]).astype(np.float64)
    per_posting = np.concatenate([np.full(len(p[0]), idf) for p, idf in parts])
    bm25 = per_posting * tfs * (K1 + 1) / (tfs + K1 * (1 - B + B * length / weights.avgdl))
    unique, scores, covered = _per_chunk(ids, bm25, per_posting)
    order = best_first(unique, scores, limit, only_ids)
    return [(int(unique[i]), float(scores[i]), float(covered[i])) for i in order]


def search(
    con: psycopg.Connection,
    generation: int,
    terms: Sequence[str],
    *,
    limit: int,
    only_ids: Sequence[int] | None = None,
    memo: PostingsMemo | None = None,
    known: dict[tuple[str, ...], QueryWeights | None] | None = None,
) -> list[KeywordHit]:
    """The best ``limit`` chunks by BM25 (all of ``only_ids`` that match, when given), best first.

    The query's postings come back as arrays (one row per term) and are scored with NumPy: aggregating
    a common term's tens of thousands of postings in SQL took several times longer. A short
    ``only_ids`` list is scored in SQL from those chunks' postings alone."""
    if not terms or (only_ids is not None and not only_ids):
        return []
    key = tuple(terms)
    if known is not None and key in known:  # ``known``: statistics read in this snapshot already
        weights = known[key]
    else:
        weights = query_weights(con, generation, terms)
        if known is not None:
            known[key] = weights
    if weights is None:
        return []
    if only_ids is not None and len(only_ids) <= SQL_SCORED_IDS:
        params = {
            "terms": list(weights.idf),
            "idfs": list(weights.idf.values()),
            "avgdl": weights.avgdl,
            "g": generation,
            "ids": list(only_ids),
        }
        rows = con.execute(_scored_sql(), params).fetchall()
        scored = [(int(cid), float(bm25), float(covered)) for cid, bm25, covered in rows]
    else:
        scored = _score(weights, _postings(con, generation, weights, memo), limit, only_ids)
    return [KeywordHit(cid, bm25, covered, weights.total) for cid, bm25, covered in scored]
