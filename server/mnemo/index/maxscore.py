"""The best ``k`` chunks by a sum of per-term scores, without adding up every posting (MaxScore).

A keyword query's common words ("the", "was", "for") have postings in most chunks but score almost
nothing: at 100,000 notes a query of six words read 0.6-1.5 million postings, and adding each into an
array by chunk id took 10-17 ms of the slowest searches' 14-24 ms of CPU (docs/benchmarks.md, team
memory, sixth round at 100,000 notes). Every
term's contribution is at most its bound (its largest score, ``max(share) * idf``), so once the ``k``-th
best score of the rarest terms alone exceeds the sum of the other terms' bounds, no chunk that has none
of the rarest terms can reach the top ``k``: the other terms are looked up (binary search) for the
chunks that could still make it, instead of being added in full. The answer is exact: the same chunks
and scores as adding every posting, ties by chunk id.

The ``k``-th best score is bounded from below cheaply: the array is cut into blocks of ``BLOCK``
chunks, and ``k`` blocks whose best is at least ``v`` hold ``k`` chunks scoring at least ``v``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BLOCK = 64
CHECK_PAST = 50_000
"""The lower bound is worked out (a pass over the array, ~0.3 ms at 357,000 chunks) only while the
terms not yet added hold at least this many postings: adding fewer costs less than the check."""
LOOKUPS_PER_POSTING = 16
"""The other terms are looked up when the chunks that could still make it are at most one in this
many of their postings (a binary search per chunk and term against an add per posting)."""
SLACK = 1e-9
"""Sums of floats in another order differ in the last bits: the cut is lowered by this share so that a
chunk tied with the ``k``-th best is never lost to rounding."""

Term = tuple[np.ndarray, np.ndarray, float]
"""A term's postings: chunk ids (ascending, unique), each chunk's share (> 0) and the term's weight; a
chunk's score for the term is its share times the weight (BM25: the term-frequency part times IDF)."""


def kth_block_best(dense: np.ndarray, k: int) -> float:
    """A lower bound on the ``k``-th best value of ``dense`` (length a multiple of :data:`BLOCK`):
    the ``k``-th best of the blocks' best values; 0 when fewer than ``k`` blocks."""
    best = dense.reshape(-1, BLOCK).max(axis=1)
    if len(best) < k:
        return 0.0
    return float(np.partition(best, len(best) - k)[len(best) - k])


def add_into(dense: np.ndarray, term: Term, lo: int) -> None:
    """``term``'s score of each of its chunks added into ``dense`` (indexed by chunk id - ``lo``)."""
    ids, shares, weight = term
    dense[np.subtract(ids, lo, dtype=np.intp)] += shares * weight


def found_in(ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``wanted``, its position in ``ids`` (ascending) and whether it is there (binary
    search; the position is in range either way). ``wanted`` is searched as ``ids``' type when its
    values fit: NumPy otherwise copies the whole of ``ids`` (a common word's 100,000s of int32 chunk
    ids) to ``wanted``'s int64 for each search."""
    if wanted.dtype != ids.dtype and len(wanted) and ids.dtype.kind == wanted.dtype.kind == "i":
        fits = np.iinfo(ids.dtype)
        if fits.min <= wanted.min() and wanted.max() <= fits.max:
            wanted = wanted.astype(ids.dtype)
    at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    return at, ids[at] == wanted


def scores_at(term: Term, wanted: np.ndarray) -> np.ndarray:
    """``term``'s score of each of ``wanted`` (0 where it has no posting)."""
    ids, shares, weight = term
    at, found = found_in(ids, wanted)
    return np.where(found, shares[at] * weight, 0.0)


SPARSE_SPAN_FACTOR = 16
"""Terms with fewer postings than the id span over this are summed by sorting their postings, not in an
array of the span: at 100,000 notes the rare words of a query with common ones had some 20-250 postings,
and finding them again in an array of 357,000 chunks took ~0.5 ms a search."""


def sparse_sums(terms: Sequence[Term]) -> tuple[np.ndarray, np.ndarray]:
    """The chunks with a posting in ``terms`` (ascending ids) and the sum of their scores, by sorting the
    postings instead of adding them into an array of the whole id span; added in the order of ``terms``."""
    ids = np.concatenate([term[0] for term in terms]).astype(np.int64)
    unique, inverse = np.unique(ids, return_inverse=True)
    scores = np.concatenate([shares * weight for _, shares, weight in terms])
    return unique, np.bincount(inverse, weights=scores, minlength=len(unique))


def sums_by_id(terms: Sequence[Term], lo: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunks with a posting in ``terms`` (ascending ids, every one in ``[lo, lo + span)``) and the
    sum of their scores, added in the order of ``terms`` either way (the same floats)."""
    if sum(len(term[0]) for term in terms) * SPARSE_SPAN_FACTOR < span:
        return sparse_sums(terms)
    dense = np.zeros(span)
    for term in terms:
        add_into(dense, term, lo)
    found = np.flatnonzero(dense)
    return found + lo, dense[found]


def best_of_terms(terms: Sequence[Term], lo: int, span: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``limit`` best chunk ids by the sum of ``terms``' scores, best first, ties by id, with their
    scores. Every id lies in ``[lo, lo + span)``."""
    k = int(limit)
    terms = [term for term in terms if len(term[0])]
    if k <= 0 or not terms:
        return np.zeros(0, np.int64), np.zeros(0)
    bounds = [float(shares.max()) * weight for _, shares, weight in terms]
    rarest_first = sorted(range(len(terms)), key=lambda i: len(terms[i][0]))
    dense = np.zeros(-(-span // BLOCK) * BLOCK)
    rest_bound = sum(bounds)
    rest_postings = sum(len(term[0]) for term in terms)
    candidates: np.ndarray | None = None
    added = 0
    for done, i in enumerate(rarest_first, start=1):
        add_into(dense, terms[i], lo)
        rest_bound -= bounds[i]
        rest_postings -= len(terms[i][0])
        added += len(terms[i][0])
        if done == len(terms) or rest_postings < CHECK_PAST or added < k:  # (fewer than k: k-th best 0)
            continue
        floor = kth_block_best(dense, k) - rest_bound  # what a chunk's score so far must reach
        if floor <= 0:
            continue
        maybe = np.flatnonzero(dense >= floor * (1 - SLACK))
        if len(maybe) * LOOKUPS_PER_POSTING <= rest_postings:
            candidates = maybe
            break
    if candidates is None:  # every term added
        top = best_in_dense(dense, k)
        return top + lo, dense[top]
    totals = dense[candidates]
    chosen = candidates + lo
    for i in rarest_first[done:]:
        totals += scores_at(terms[i], chosen)
    top = best_positions(chosen, totals, k)
    return chosen[top].astype(np.int64), totals[top]


def best_in_dense(dense: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` best values of ``dense`` (> 0), best first, ties by position: those
    over the ``k``-th best's lower bound, then sorted. (NumPy's partition of a whole array mostly of zeros
    took 30-75 ms at 357,000 chunks: its selection degrades on many equal values.)"""
    if k <= 0:
        return np.zeros(0, np.intp)
    whole = len(dense) // BLOCK * BLOCK
    floor = kth_block_best(dense[:whole], k) if whole else 0.0
    candidates = np.flatnonzero(dense >= floor * (1 - SLACK)) if floor > 0 else np.flatnonzero(dense)
    return candidates[best_positions(candidates, dense[candidates], k)]


def best_positions(ids: np.ndarray, totals: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best ``totals``, best first, ties by ``ids`` (ascending)."""
    if k <= 0:
        return np.zeros(0, np.intp)
    if len(totals) > 8 * k:  # many below or tied at the cut: every one at the k-th best or above, sorted
        kth = np.partition(totals, len(totals) - k)[len(totals) - k]
        keep = np.flatnonzero(totals >= kth)
        return keep[np.lexsort((ids[keep], -totals[keep]))[:k]]
    return np.lexsort((ids, -totals))[:k]


COMMON_PAST = 20_000
"""A term with more postings than this is common (at 100,000 notes: "the", "to", "for", in 40-93% of the
chunks): its list is not added up for each search; the best chunks by a query's common terms alone are
kept (:class:`CommonTop`) and its other terms scored around them (:func:`best_with_common`)."""
DEPTH_PER_PLACE = 4
"""A :class:`CommonTop` holds this many chunks per place asked for (at least :data:`MIN_DEPTH`): chunks
that also have one of the query's other terms drop out of it, and ``k`` must be left."""
MIN_DEPTH = 64


@dataclass(frozen=True)
class CommonTop:
    """The best chunks by some common terms' scores alone, best first, ties by id."""

    ids: np.ndarray
    scores: np.ndarray
    complete: bool
    """Whether that is every chunk with a posting of those terms."""
    bound: float
    """The most those terms can add to any chunk's score (the sum of their largest scores)."""

    @classmethod
    def of(cls, common: Sequence[Term], lo: int, span: int, depth: int) -> CommonTop:
        """The best ``depth`` chunks of ``common`` (every id in ``[lo, lo + span)``), every posting added."""
        dense = np.zeros(span)
        for term in common:
            add_into(dense, term, lo)
        top = best_in_dense(dense, depth)
        bound = sum(float(shares.max()) * weight for ids, shares, weight in common if len(ids))
        return cls(top + lo, dense[top], len(top) < depth, bound)


def depth_for(limit: int) -> int:
    return max(DEPTH_PER_PLACE * int(limit), MIN_DEPTH)


def best_with_common(
    rare: Sequence[Term], common: Sequence[Term], top: CommonTop, lo: int, span: int, limit: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """What :func:`best_of_terms` returns for ``rare`` and ``common`` together, given ``top``, the best
    chunks by the ``common`` terms alone: None when ``top`` is too short to tell.

    A chunk without a rare term scores its common terms' sum, so the best of those are the first of
    ``top`` that have no rare term. Those ``k`` make a lower bound on the ``k``-th best score; a chunk
    with a rare term is scored (its common terms looked up by binary search) only when its rare terms'
    score plus the common terms' largest sum could reach that bound."""
    k = int(limit)
    if k <= 0:
        return np.zeros(0, np.int64), np.zeros(0)
    if not rare:  # common words alone: the kept list is the answer
        if len(top.ids) < k and not top.complete:
            return None
        return top.ids[:k].astype(np.int64), top.scores[:k]
    rare_ids, rare_sums = sums_by_id(rare, lo, span)
    alone = ~found_in(rare_ids, top.ids)[1] if len(rare_ids) else np.ones(len(top.ids), bool)
    rest_ids, rest_scores = top.ids[alone][:k], top.scores[alone][:k]
    if len(rest_ids) < k and not top.complete:
        return None
    floor = (float(rest_scores[k - 1]) if len(rest_scores) == k else 0.0) - top.bound
    scored = rare_sums >= floor * (1 - SLACK) if floor > 0 else slice(None)
    scored_ids, totals = rare_ids[scored], rare_sums[scored]
    for term in common:
        totals += scores_at(term, scored_ids)
    every_id = np.concatenate([scored_ids, rest_ids]).astype(np.int64)
    every_score = np.concatenate([totals, rest_scores])
    best = best_positions(every_id, every_score, k)
    return every_id[best], every_score[best]
