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
        ids, shares, weight = terms[i]
        dense[np.subtract(ids, lo, dtype=np.intp)] += shares * weight
        rest_bound -= bounds[i]
        rest_postings -= len(ids)
        if done == len(terms) or rest_postings < CHECK_PAST or len(ids) + added < k:
            added += len(ids)  # (fewer than k chunks so far: the k-th best is 0)
            continue
        added += len(ids)
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
        ids, shares, weight = terms[i]
        at = np.minimum(np.searchsorted(ids, chosen), len(ids) - 1)
        totals += np.where(ids[at] == chosen, shares[at] * weight, 0.0)
    top = best_positions(chosen, totals, k)
    return chosen[top].astype(np.int64), totals[top]


def best_in_dense(dense: np.ndarray, k: int) -> np.ndarray:
    """The positions of the ``k`` best values of ``dense`` (> 0), best first, ties by position: those
    over the ``k``-th best's lower bound, then sorted. (NumPy's partition of a whole array mostly of zeros
    took 30-75 ms at 357,000 chunks: its selection degrades on many equal values.)"""
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
