"""BM25 on PostgreSQL from our own term statistics, with the same terms and formula as the DuckDB engine.

A chunk's ``terms`` (:func:`mnemo.text.terms.terms_string`: words, identifier parts, CJK bigrams) are
Porter-stemmed as DuckDB's fts extension stems them (libstemmer's Porter, :mod:`mnemo.text.stems`), so
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

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from mnemo.index.api import KeywordHit
from mnemo.index.fts import K1, B, bm25_idf
from mnemo.index.maxscore import (
    COMMON_PAST,
    CommonTop,
    add_into,
    best_of_terms,
    best_with_common,
    depth_for,
    found_in,
    sparse_sums,
)
from mnemo.index.pg_arrays import array_cursor
from mnemo.index.pg_memos import CommonTops, Postings, PostingsMemo, SnapshotWeights
from mnemo.index.pg_schema import SCHEMA
from mnemo.index.pg_topk import score_ids, top_k
from mnemo.index.postings import best_first, best_of_dense
from mnemo.text.stems import porter_stems

EMPTY_STEM = "\u2205"
"""Stands for the empty stem (Porter stems "s", as in "it's", to nothing; a tsvector cannot hold an
empty lexeme). No term is ever "∅" (terms are letters, marks, digits, underscores), so BM25 is unchanged."""


class PorterStems:
    """Porter stems exactly as DuckDB's fts extension computes them (:mod:`mnemo.text.stems`, tested equal
    to ``stem(term, 'porter')``), the empty stem spelled :data:`EMPTY_STEM`."""

    def of(self, terms: Iterable[str]) -> dict[str, str]:
        """term -> stem for every term given."""
        return {term: stem or EMPTY_STEM for term, stem in porter_stems(terms).items()}


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


@dataclass(frozen=True)
class QueryWeights:
    idf: dict[str, float]
    """Stem -> IDF, for the query's stems some chunk contains."""
    total: float
    avgdl: float
    version: int = 0
    """The generation's postings version these statistics (and any postings read with them) belong to."""
    min_a0: float = 0.0
    """The smallest average length the generation's stored impacts were computed with (0: none stored)."""
    postings: int = 0
    """How many postings the query's stems have (the sum of their document frequencies)."""
    rarest: float = 0.0
    """The share of chunks that contain the query's rarest stem."""
    df: Mapping[str, float] = field(default_factory=dict)
    """Stem -> how many chunks contain it (its postings)."""


def query_weights(con: psycopg.Connection, generation: int, terms: Sequence[str]) -> QueryWeights | None:
    """The query's stems, their IDF and the collection statistics, from one small query."""
    stems = sorted(set(STEMS.of(t for t in terms if t).values()))
    if not stems:
        return None
    rows = con.execute(
        f"SELECT t.term, t.df, g.docs, g.total_len, g.version, g.min_a0 FROM {SCHEMA}.generations g "
        f"LEFT JOIN {SCHEMA}.terms t ON t.g = g.id AND t.term = ANY(%s) AND t.df > 0 WHERE g.id = %s",
        [stems, generation],
    ).fetchall()
    if not rows:
        return None
    num_docs, total_len = float(rows[0][2] or 0), float(rows[0][3] or 0)
    known = {str(term): float(df) for term, df, *_ in rows if term is not None}
    if not known:
        return None
    idf = {term: bm25_idf(num_docs, df) for term, df in known.items()}
    mean_idf = sum(idf.values()) / len(idf)
    avgdl = _average_length(num_docs, total_len)
    total = sum(idf.values()) + (len(stems) - len(known)) * mean_idf
    count, rarest = int(sum(known.values())), min(known.values()) / max(num_docs, 1.0)
    return QueryWeights(idf, total, avgdl, int(rows[0][4]), float(rows[0][5] or 0.0), count, rarest, known)


def _average_length(num_docs: float, total_len: float) -> float:
    return (total_len / num_docs if num_docs else 0.0) or 1.0


def _held(generation: int, weights: QueryWeights, memo: PostingsMemo | None) -> dict[str, Postings]:
    """The query stems' postings that ``memo`` holds at this version."""
    if memo is None:
        return {}
    found = ((term, memo.get((generation, term), weights.version)) for term in weights.idf)
    return {term: postings for term, postings in found if postings is not None}


def _lacking(weights: QueryWeights, held: Mapping[str, Postings]) -> dict[str, float]:
    """The query's stems whose postings are not ``held``, with how many postings each has."""
    return {term: df for term, df in weights.df.items() if term not in held}


def _few_missing(weights: QueryWeights, held: Mapping[str, Postings]) -> bool:
    """Whether the stems whose postings are not ``held`` have at most :data:`MISSING_READ` of them (the
    rare stems' short lists): reading those and scanning every posting from memory then costs one
    round trip, where pruning costs two to four (~14 ms a pruned query at 100,000 notes, against a few
    ms for the scan)."""
    return sum(_lacking(weights, held).values()) <= MISSING_READ


MISSING_READ = 20_000
"""Most postings a query may still have to read for :func:`_few_missing` (a word in 2% of 357,000 chunks
has ~7,000)."""
HOLD_AFTER_PRUNE = 2_000_000
"""Most postings a pruned query's missing stems may have for :func:`search` to ask that they be read in the
background (``on_pruned``; 12 bytes a posting: 24 MB of the 128 MB memo)."""
SCAN_ALL_BELOW = 200_000
"""A query whose stems have at most this many postings in all is scored from every posting (a few ms
from the memo) without trying to prune: pruning's round trips cost more than that saves."""
PRUNE_RAREST_SHARE = 0.02
"""Nor is a query pruned whose every stem is in more than this share of the chunks: its best chunks score
nearly alike and no bound separates them (at 100,000 synthetic notes such queries gave up after three
rounds, ~10 ms for nothing; the profiled queries that pruned had a stem in under 0.1% of the chunks)."""
DENSE_SPAN_FACTOR = 8
SQL_SCORED_IDS = 2_000
"""``only_ids`` up to this many are scored in SQL (their postings by key); more, like a top-k, in NumPy."""


def _postings(
    con: psycopg.Connection,
    generation: int,
    weights: QueryWeights,
    memo: PostingsMemo | None,
    held: Mapping[str, Postings] | None = None,
) -> dict[str, Postings]:
    """term -> (chunk ids, tf, len) of the query terms' postings: from ``memo`` when it has them at this
    version (``held``: what it was found to hold), else read by one index-only scan per term."""
    out = dict(_held(generation, weights, memo) if held is None else held)
    missing = [term for term in weights.idf if term not in out]
    out.update(_read_kept(con, generation, missing, weights.avgdl, weights.version, memo))
    return out


def _read_kept(
    con: psycopg.Connection,
    generation: int,
    stems: Sequence[str],
    avgdl: float,
    version: int,
    memo: PostingsMemo | None,
) -> dict[str, Postings]:
    """``stems``' postings read (none: no round trip), and kept in ``memo`` at ``version``."""
    read = _read_postings(con, generation, stems, avgdl) if stems else {}
    for stem, postings in read.items():
        if memo is not None:
            memo.put((generation, stem), version, postings)
    return read


def hold_postings(con: psycopg.Connection, generation: int, stems: Sequence[str], memo: PostingsMemo) -> int:
    """Read into ``memo`` the postings of those of ``stems`` it does not hold, at the version ``con``'s
    snapshot sees (:mod:`mnemo.index.pg_prefetch` calls this on its own thread); how many stems read."""
    row = con.execute(
        f"SELECT docs, total_len, version FROM {SCHEMA}.generations WHERE id = %s", [generation]
    ).fetchone()
    if row is None:
        return 0
    avgdl, version = _average_length(float(row[0] or 0), float(row[1] or 0)), int(row[2])
    missing = [stem for stem in stems if memo.get((generation, stem), version) is None]
    return len(_read_kept(con, generation, missing, avgdl, version, memo))


def _score_given(
    con: psycopg.Connection,
    generation: int,
    weights: QueryWeights,
    held: Mapping[str, Postings],
    only_ids: Sequence[int],
) -> list[tuple[int, float, float]]:
    """The BM25 of each of ``only_ids`` with a query term, best first, then by id. The terms whose
    postings the process holds at this version are scored from them (each id found by binary search);
    the rest in SQL by key (:func:`mnemo.index.pg_topk.score_ids`), a round trip of ~2.6 ms a search at
    100,000 notes that a warm process no longer makes. BM25 is a sum over terms: the same scores."""
    rest = {term: idf for term, idf in weights.idf.items() if term not in held}
    if not held:
        return score_ids(con, generation, rest, weights.avgdl, only_ids)
    want = np.unique(np.asarray(only_ids, np.int64))
    scores, covered = np.zeros(len(want)), np.zeros(len(want))
    for term, (ids, shares) in held.items():
        idf = weights.idf[term]
        if len(ids):
            at, found = found_in(ids, want)
            scores += np.where(found, shares[at] * idf, 0.0)
            covered += np.where(found, idf, 0.0)
    if rest:
        position = {cid: i for i, cid in enumerate(want.tolist())}
        for cid, bm25, cov in score_ids(con, generation, rest, weights.avgdl, only_ids):
            scores[position[cid]] += bm25
            covered[position[cid]] += cov
    hit = np.flatnonzero(covered > 0)
    hit = hit[np.lexsort((want[hit], -scores[hit]))]
    return [(int(want[i]), float(scores[i]), float(covered[i])) for i in hit]


_POSTINGS_SQL = (
    "SELECT q.term, a.ids, a.tfs, a.lens FROM unnest(%(terms)s::text[]) AS q(term) CROSS JOIN LATERAL "
    "(SELECT array_agg(x.chunk_id) AS ids, array_agg(x.tf) AS tfs, array_agg(x.len) AS lens FROM "
    f"(SELECT p.chunk_id, p.tf, p.len FROM {SCHEMA}.postings p WHERE p.g = %(g)s AND p.term = q.term "
    "ORDER BY p.chunk_id) x) a"
)
"""Each term's postings as three arrays in chunk id order: an index-only scan of the primary key per term.
Grouping every term's postings at once let the planner take the impact B-tree, or a parallel plan, and
the arrays came back unordered: at 100,000 notes a common word's 250,000 postings took ~65 ms to read
and ~20 ms to sort, against ~50 ms read in order."""


def _read_postings(
    con: psycopg.Connection, generation: int, terms: Sequence[str], avgdl: float
) -> dict[str, Postings]:
    rows = array_cursor(con).execute(_POSTINGS_SQL, {"terms": list(terms), "g": generation}).fetchall()
    out = {}
    for term, ids, tfs, lens in rows:
        if ids is None:
            continue
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):  # ordered, unless planned otherwise
            order = np.argsort(ids, kind="stable")
            ids, tfs, lens = ids[order], tfs[order], lens[order]
        tf, length = tfs.astype(np.float64), lens.astype(np.float64)
        if len(ids) and int(ids[-1]) <= np.iinfo(np.int32).max and int(ids[0]) >= 0:
            ids = ids.astype(np.int32)  # a third less to keep in the memo
        out[str(term)] = (ids, tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl)))
    return out


def _best(
    weights: QueryWeights,
    postings: dict[str, Postings],
    lo: int,
    span: int,
    limit: int,
    tops: tuple[int, CommonTops] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``limit`` chunks of every posting given: around the best chunks by the query's common
    terms alone, kept in ``tops`` (generation, memo) at this version, when it has any; else by
    :func:`mnemo.index.maxscore.best_of_terms`."""
    terms = {t: (postings[t][0], postings[t][1], idf) for t, idf in weights.idf.items() if t in postings}
    common = sorted(t for t, term in terms.items() if len(term[0]) > COMMON_PAST)
    if tops is not None and common:
        generation, memo = tops
        depth = depth_for(limit)
        top = memo.get((generation, tuple(common)), weights.version)
        if top is None or (len(top.ids) < depth and not top.complete):
            top = CommonTop.of([terms[t] for t in common], lo, span, depth)
            memo.put((generation, tuple(common)), weights.version, top)
        rare = [term for t, term in terms.items() if t not in common and len(term[0])]
        found = best_with_common(rare, [terms[t] for t in common], top, lo, span, limit)
        if found is not None:
            return found
    return best_of_terms(list(terms.values()), lo, span, limit)


def _score(
    weights: QueryWeights,
    postings: dict[str, Postings],
    limit: int,
    only_ids: Sequence[int] | None,
    tops: tuple[int, CommonTops] | None = None,
) -> list[tuple[int, float, float]]:
    """BM25 of every chunk in ``postings`` as :class:`mnemo.index.postings.PostingsCache` computes it.
    A generation's chunk ids are dense: each term's shares are added into an array indexed by chunk id (a
    term has one posting per chunk, so no id repeats within an add); ids spread wider are sorted. The
    IDF mass each chunk covers is worked out for the chunks returned only, by binary search in each
    term's ids (ascending: :func:`_read_postings`)."""
    parts = [(postings[t], idf) for t, idf in weights.idf.items() if t in postings and len(postings[t][0])]
    if not parts:
        return []
    lo = min(int(p[0][0]) for p, _ in parts)
    span = max(int(p[0][-1]) for p, _ in parts) - lo + 1
    if span > max(DENSE_SPAN_FACTOR * sum(len(p[0]) for p, _ in parts), 1 << 20):
        unique, scores = sparse_sums([(ids, share, idf) for (ids, share), idf in parts])
        order = best_first(unique, scores, limit, only_ids)
        chosen, chosen_scores = unique[order], scores[order]
    elif only_ids is None:
        chosen, chosen_scores = _best(weights, postings, lo, span, limit, tops)
    else:
        dense = np.zeros(span)
        for (ids, share), idf in parts:
            add_into(dense, (ids, share, idf), lo)
        chosen, chosen_scores = best_of_dense(dense, lo, limit, only_ids)
    covered = np.zeros(len(chosen))
    for (ids, _), idf in parts:
        covered += np.where(found_in(ids, chosen)[1], idf, 0.0)
    return [
        (int(cid), float(score), float(cov))
        for cid, score, cov in zip(chosen, chosen_scores, covered, strict=True)
    ]


def search(
    con: psycopg.Connection,
    generation: int,
    terms: Sequence[str],
    *,
    limit: int,
    only_ids: Sequence[int] | None = None,
    memo: PostingsMemo | None = None,
    known: SnapshotWeights | None = None,
    on_pruned: Callable[[int, tuple[str, ...]], None] | None = None,
) -> list[KeywordHit]:
    """The best ``limit`` chunks by BM25 (all of ``only_ids`` that match, when given), best first.

    The top ``limit`` reads only the heads of the terms' impact-ordered lists when that prunes
    (:func:`mnemo.index.pg_topk.top_k`, exact); a short ``only_ids`` list is scored in SQL from those
    chunks' postings alone; otherwise (a filter, a query of common words only) every posting of the
    query's terms is scored, read as arrays (one row per term, kept in ``memo``) and summed with NumPy:
    aggregating a common term's tens of thousands of postings in SQL took several times longer.
    ``on_pruned(generation, stems)`` is told the stems a pruned search lacked, when they have at most
    :data:`HOLD_AFTER_PRUNE` postings (:class:`mnemo.index.pg_prefetch.PostingsPrefetch` reads them)."""
    if not terms or (only_ids is not None and not only_ids):
        return []
    key = tuple(terms)
    found = None if known is None else known.get(key)  # read in this snapshot, or kept at its version
    if found is not None:
        weights = found[0]
    else:
        weights = query_weights(con, generation, terms)
        if known is not None:
            known.put(key, weights)
    if weights is None:
        return []
    held = _held(generation, weights, memo)
    pruned = (
        None
        if only_ids is not None
        or weights.postings <= SCAN_ALL_BELOW
        or weights.rarest > PRUNE_RAREST_SHARE
        or (memo is not None and _few_missing(weights, held))
        else top_k(con, generation, weights.idf, weights.avgdl, weights.min_a0, limit)
    )
    if pruned is not None:
        scored = pruned
        lacking = _lacking(weights, held)
        if on_pruned is not None and sum(lacking.values()) <= HOLD_AFTER_PRUNE:
            on_pruned(generation, tuple(sorted(lacking)))
    elif only_ids is not None and len(only_ids) <= SQL_SCORED_IDS:
        scored = _score_given(con, generation, weights, held, only_ids)
    else:
        tops = None if memo is None else (generation, memo.tops)
        scored = _score(weights, _postings(con, generation, weights, memo, held), limit, only_ids, tops)
    return [KeywordHit(cid, bm25, covered, weights.total) for cid, bm25, covered in scored]
