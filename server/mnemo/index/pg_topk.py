"""Exact BM25 scores of given chunks, and an exact top-k that reads only the head of each inverted list.

The top-k prunes with the *threshold algorithm* on impact-ordered postings. Each posting stores its
impact, the tf part of its BM25 score (:func:`mnemo.index.pg_schema.impact_sql`), computed for the
generation's average length ``A0`` when it was written; a B-tree reads a term's postings by impact,
highest first. A round reads the first ``m`` postings of each query term (with their tf and length:
their exact share of the score, summed with NumPy). A chunk seen nowhere can score at most

    bound = sum over the terms whose list was cut at m of  idf(t) * factor * impact of the last one read

and a seen chunk at most its exact shares plus that term for each cut list it was not seen in. Each
round scores the k chunks with the best shares exactly, from their postings by key (:func:`score_ids`);
when the k-th best exact score ``theta`` is above ``bound``, no unseen chunk can enter the top k, and
the seen chunks whose upper bound reaches ``theta`` are scored exactly too, best upper bound first
(``theta`` rises as they are, so most are never scored). The best k of the chunks scored are the full
scan's top k, in the same order (score, then chunk id). Otherwise ``m`` grows fourfold and the round
repeats; once no list is cut, every posting was read and the shares are the scores.

Pruning pays when a few chunks stand out (a query with a rare word, a name, an identifier). When many
chunks score nearly alike (every word common, one occurrence each), the bound falls slowly and many
chunks reach it: past :data:`MAX_READ` postings of a term or :data:`MAX_VERIFY` chunks to score by key,
:func:`top_k` gives up and the caller scores every posting (:func:`mnemo.index.pg_terms.search`),
which is then cheaper. Measured at 100,000 synthetic notes: docs/benchmarks.md, team memory.

Why ``factor = max(1, avgdl / min_a0)`` bounds a posting's true impact: with ``D(A) = tf + k1(1-b) +
k1*b*len/A``, the impact at average length ``A`` is ``tf(k1+1) / D(A)``, and the query uses today's
``A = avgdl``. D decreases as A grows, so for ``A <= A0`` the true impact is at most the stored one.
For ``A > A0``, each of D(A0)'s three terms is at most ``A/A0`` times the same term of D(A) (the first
two are equal, the third is exactly A/A0 times), so ``D(A0) <= (A/A0) D(A)`` and the true impact is at
most ``A/A0`` times the stored one, and ``A/A0 <= A/min_a0`` since every ``A0 >= min_a0``. A posting
below the last one read in its list has a stored impact no higher, hence a true impact of at most
``factor`` times the last one's. Stored impacts are ``real`` (relative rounding under 2**-24) and sums
in NumPy and SQL differ in the last bits, hence :data:`ROUNDING` and :data:`SLACK`: pruning only ever
errs on reading and scoring more.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg

from mnemo.index.fts import K1, B
from mnemo.index.pg_arrays import array_cursor
from mnemo.index.pg_schema import IMPACT_B, IMPACT_K1, SCHEMA

assert (IMPACT_K1, IMPACT_B) == (K1, B), "stored impacts must use the scoring's k1 and b"

FIRST_READ = 2
"""The first round reads ``FIRST_READ * limit`` postings of each term (at least :data:`MIN_READ`)."""
MIN_READ = 32
GROWTH = 4
MAX_READ = 1_024
"""Postings of one term read before giving up (rounds of 48, 192, 768 for a top 24: ~10 ms at 100,000
notes; a fourth round of 3,072 a term cost more than it saved there)."""
MAX_VERIFY = 1_024
"""Chunks scored by key before giving up (~25 ms at 100,000 notes)."""
ROUNDING = 1 + 1e-6
SLACK = 1e-9

Scored = list[tuple[int, float, float]]
"""(chunk id, BM25, IDF mass of the query terms the chunk contains), best first, ties by chunk id."""

_SCORED_SQL = (
    f"SELECT p.chunk_id, sum(q.idf * p.tf::float8 * {K1 + 1!r}::float8 / (p.tf::float8 + "
    f"{K1!r}::float8 * ({1 - B!r}::float8 + {B!r}::float8 * p.len::float8 / %(avgdl)s::float8))) AS bm25, "
    "sum(q.idf) AS covered FROM unnest(%(terms)s::text[], %(idfs)s::float8[]) AS q(term, idf) "
    f"JOIN {SCHEMA}.postings p ON p.g = %(g)s AND p.term = q.term AND p.chunk_id = ANY(%(ids)s::bigint[]) "
    "GROUP BY p.chunk_id ORDER BY bm25 DESC, p.chunk_id"
)
_HEADS_SQL = (
    "SELECT q.term, count(*), min(h.imp)::float8, array_agg(h.chunk_id), array_agg(h.tf), array_agg(h.len) "
    f"FROM unnest(%(terms)s::text[], %(ms)s::int[]) AS q(term, m) CROSS JOIN LATERAL (SELECT p.chunk_id, p.tf, p.len, p.imp "
    f"FROM {SCHEMA}.postings p WHERE p.g = %(g)s AND p.term = q.term ORDER BY p.imp DESC LIMIT q.m) h "
    "GROUP BY q.term"
)


def score_ids(
    con: psycopg.Connection, generation: int, idf: Mapping[str, float], avgdl: float, ids: Sequence[int]
) -> Scored:
    """The exact BM25 of each of ``ids`` that contains a query term (its postings read by key)."""
    params = {
        "terms": list(idf),
        "idfs": list(idf.values()),
        "avgdl": avgdl,
        "g": generation,
        "ids": list(ids),
    }
    rows = con.execute(_SCORED_SQL, params).fetchall()
    return [(int(cid), float(bm25), float(covered)) for cid, bm25, covered in rows]


@dataclass(frozen=True)
class _Round:
    """What one round read: each seen chunk's exact shares and upper bound, and the unseen ones' bound."""

    ids: np.ndarray
    shares: np.ndarray
    covered: np.ndarray
    upper: np.ndarray
    rest: dict[str, float]
    """Per term, the most its unread postings can add to a chunk's score (0: the whole list was read)."""

    @property
    def bound(self) -> float:
        return sum(self.rest.values())


def _read_heads(
    con: psycopg.Connection,
    generation: int,
    idf: Mapping[str, float],
    avgdl: float,
    factor: float,
    reads: Mapping[str, int],
) -> _Round:
    """The first ``reads[term]`` postings of each term, by impact."""
    params = {"terms": list(reads), "ms": list(reads.values()), "g": generation}
    rows = array_cursor(con).execute(_HEADS_SQL, params).fetchall()
    ids, shares, weights, missing = [], [], [], []
    rest: dict[str, float] = {}
    for term, count, last, chunk_ids, tfs, lens in rows:
        w = idf[str(term)]
        tf, length = tfs.astype(np.float64), lens.astype(np.float64)
        ids.append(chunk_ids)
        shares.append(w * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl)))
        weights.append(np.full(len(chunk_ids), w))
        # a cut list's unread part: at most this for any chunk not among the postings read
        rest[str(term)] = w * factor * float(last) * ROUNDING if int(count) >= reads[str(term)] else 0.0
        missing.append(np.full(len(chunk_ids), rest[str(term)]))
    if not ids:
        empty = np.zeros(0)
        return _Round(empty.astype(np.int64), empty, empty, empty, rest)
    unique, summed = _per_chunk(np.concatenate(ids), [np.concatenate(x) for x in (shares, weights, missing)])
    # upper bound of a seen chunk: its shares, plus the unread part of each cut list it was not seen in
    bound = sum(rest.values())
    return _Round(unique, summed[0], summed[1], summed[0] + (bound - summed[2]), rest)


def _per_chunk(ids: np.ndarray, values: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct ids (ascending) and each of ``values`` summed per id: a counting array over the id
    span when the ids are dense enough (a generation's are), else a sort."""
    lo = int(ids.min())
    span = int(ids.max()) - lo + 1
    if span > max(8 * len(ids), 1 << 16):
        unique, inverse = np.unique(ids, return_inverse=True)
        return unique, [np.bincount(inverse, weights=v, minlength=len(unique)) for v in values]
    at = ids - lo
    present = np.flatnonzero(np.bincount(at, minlength=span))
    return present + lo, [np.bincount(at, weights=v, minlength=span)[present] for v in values]


class _Verified:
    """Chunks scored exactly so far (by key, :func:`score_ids`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.scores: dict[int, tuple[float, float]] = {}

    def add(self, rows: Scored) -> None:
        self.scores.update((cid, (bm25, covered)) for cid, bm25, covered in rows)

    def kth(self) -> float:
        """The ``limit``-th best exact score (a lower bound of the true one), less :data:`SLACK`; -inf
        while fewer are known."""
        if len(self.scores) < self.limit:
            return -math.inf
        return heapq.nlargest(self.limit, (s for s, _ in self.scores.values()))[-1] * (1 - SLACK)

    def best(self) -> Scored:
        ranked = sorted(self.scores.items(), key=lambda item: (-item[1][0], item[0]))[: self.limit]
        return [(cid, bm25, covered) for cid, (bm25, covered) in ranked]


def top_k(
    con: psycopg.Connection,
    generation: int,
    idf: Mapping[str, float],
    avgdl: float,
    min_a0: float,
    limit: int,
) -> Scored | None:
    """The ``limit`` best chunks by BM25, exactly as scoring every posting would rank them; None when
    that would read more than :data:`MAX_READ` postings of a term or score more than :data:`MAX_VERIFY`
    chunks by key (many chunks of near-equal scores: scoring every posting is then cheaper)."""
    if limit <= 0 or not idf:
        return []
    factor = max(1.0, avgdl / min_a0) if min_a0 > 0 else 1.0
    reads = dict.fromkeys(idf, max(MIN_READ, FIRST_READ * limit))
    verified = _Verified(limit)
    while True:
        got = _read_heads(con, generation, idf, avgdl, factor, reads)
        if got.bound == 0.0:  # every posting read: the shares are the scores
            order = np.lexsort((got.ids, -got.shares))[:limit]
            return [(int(got.ids[i]), float(got.shares[i]), float(got.covered[i])) for i in order]
        # the likeliest (best shares) scored exactly: the k-th best is the threshold to beat
        best = got.ids[np.argsort(-got.shares, kind="stable")[: limit + len(verified.scores)]]
        likely = [int(c) for c in best if int(c) not in verified.scores]
        verified.add(score_ids(con, generation, idf, avgdl, likely[:limit]))
        theta = verified.kth()
        if got.bound < theta:
            return verified.best() if _verify_rest(con, generation, idf, avgdl, got, verified) else None
        if max(reads.values()) * GROWTH > MAX_READ:
            return None
        reads = {t: m * GROWTH if got.rest.get(t, 0.0) > 0 else m for t, m in reads.items()}


def _verify_rest(
    con: psycopg.Connection,
    generation: int,
    idf: Mapping[str, float],
    avgdl: float,
    got: _Round,
    verified: _Verified,
) -> bool:
    """Score exactly, best upper bound first and in growing batches, every seen chunk whose upper bound
    still reaches the k-th best exact score (which only rises); the others cannot enter the top k.
    False: more than :data:`MAX_VERIFY` would be."""
    order = np.argsort(-got.upper, kind="stable")
    ids, upper = got.ids[order], got.upper[order]
    if np.count_nonzero(upper >= verified.kth()) > MAX_VERIFY:
        return False
    at, batch = 0, max(MIN_READ, verified.limit)
    while at < len(ids) and upper[at] >= verified.kth():
        todo = [int(c) for c in ids[at : at + batch] if int(c) not in verified.scores]
        verified.add(score_ids(con, generation, idf, avgdl, todo))
        at += batch
        batch *= 2
    return True
