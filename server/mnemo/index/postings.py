"""An in-memory copy of the BM25 postings, so a keyword query does not scan the fts ``postings`` table.

The fts tables stay the source of truth (and the cache is rebuilt from them); they hold a row per term
and chunk (0.57 as many rows as occurrences at 2,000 synthetic notes), and scanning them was most of a
search's time. The cache holds, per term id, the chunk ids containing it and their term frequencies (CSR arrays), plus each
chunk's length, and scores a query with NumPy using the same BM25 as :func:`mnemo.index.fts.search`
(k1 = 1.2, b = 0.75, the same IDF and coverage). Term ids, document frequencies and the collection
statistics still come from DuckDB in one small query, so they are exact.

Edits reach it as deltas after their transaction commits (:meth:`PostingsCache.apply`): removed chunks
are masked, added chunks' postings go to an overlay; when the overlay grows past a quarter of the base,
the next search reloads everything. A full rebuild of the fts tables invalidates the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from mnemo.index.duckdb_native import duckdb, sql_ids

from .fts import K1, SCHEMA, B, QueryWeights, query_weights
from .maxscore import best_in_dense, best_positions

OVERLAY_LIMIT = 0.25


SORTED_PAST, DENSE_FACTOR = 1 << 20, 8
"""Chunk ids up to this (or ``DENSE_FACTOR`` per posting read) are scored in arrays indexed by id; an
index whose ids spread wider (a long history of edits) sorts the postings read instead."""


class PostingsCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._terms = np.zeros(0, np.int64)  # distinct term ids, sorted
        self._starts = np.zeros(1, np.int64)  # CSR offsets into _ids/_tfs
        self._ids = np.zeros(0, np.int32)  # chunk ids (int64 past 2**31)
        self._tfs = np.zeros(0, np.float32)
        self._length = np.zeros(0, np.float32)  # chunk id -> token count (0: unknown or removed)
        self._alive = np.zeros(0, bool)
        self._overlay: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._overlay_rows = 0

    # -- loading and deltas --------------------------------------------------------------------------
    def invalidate(self) -> None:
        with self._lock:
            self._loaded = False

    def _load(self, con: duckdb.DuckDBPyConnection) -> None:
        # Sorted here, not by the query: DuckDB's sort held ~9 MB more at its peak at 2,000 notes, and
        # its allocator kept most of it (the rows are mostly in term order already: a build writes them so).
        got = con.execute(f"SELECT termid, name, tf FROM {SCHEMA}.postings").fetchnumpy()
        termids = np.asarray(got["termid"], np.int64)
        order = np.argsort(termids, kind="stable")
        termids = termids[order]
        self._ids = _narrow(np.asarray(got["name"], np.int64)[order])
        self._tfs = np.asarray(got["tf"], np.float32)[order]  # (term counts: exact in a float32)
        del got, order
        # A term's postings start where the term id changes.
        starts = np.flatnonzero(np.diff(termids, prepend=-1)).astype(np.int64)
        self._terms = termids[starts]
        self._starts = np.append(starts, len(termids))
        del termids
        docs = con.execute(f"SELECT name, len FROM {SCHEMA}.docs").fetchnumpy()
        names = np.asarray(docs["name"], np.int64)
        size = int(names.max()) + 1 if len(names) else 0
        self._length = np.zeros(size, np.float32)
        self._length[names] = np.asarray(docs["len"], np.float32)
        self._alive = np.zeros(size, bool)
        self._alive[names] = True
        self._overlay, self._overlay_rows = {}, 0
        self._loaded = True

    def _grow(self, size: int) -> None:
        if size > len(self._length):
            extra = size - len(self._length) + 1024
            self._length = np.concatenate([self._length, np.zeros(extra, np.float32)])
            self._alive = np.concatenate([self._alive, np.zeros(extra, bool)])

    def apply(self, con: duckdb.DuckDBPyConnection, added: Sequence[int], removed: Sequence[int]) -> None:
        """Bring a loaded cache up to date with a committed edit (``con`` sees the committed rows)."""
        with self._lock:
            if not self._loaded:
                return
            for cid in removed:
                if cid < len(self._alive):
                    self._alive[cid] = False
            if not added:
                return
            got = con.execute(
                f"SELECT termid, name, tf, len FROM {SCHEMA}.postings WHERE name IN ({sql_ids(added)})"
            ).fetchnumpy()
            termids = np.asarray(got["termid"], np.int64)
            ids = np.asarray(got["name"], np.int64)
            tfs = np.asarray(got["tf"], np.float32)
            self._grow(max(added) + 1)
            self._length[ids] = np.asarray(got["len"], np.float32)
            self._alive[np.asarray(added, np.int64)] = True
            for termid in np.unique(termids):
                mask = termids == termid
                self._overlay.setdefault(int(termid), []).append((ids[mask], tfs[mask]))
            self._overlay_rows += len(ids)
            if self._overlay_rows > OVERLAY_LIMIT * max(1, len(self._ids)):
                self._loaded = False  # cheaper to reload once than to keep merging

    # -- scoring -----------------------------------------------------------------------------------------
    def _postings(self, termid: int) -> tuple[np.ndarray, np.ndarray]:
        ids, tfs = [], []
        at = int(np.searchsorted(self._terms, termid))
        if at < len(self._terms) and self._terms[at] == termid:
            lo, hi = self._starts[at], self._starts[at + 1]
            ids.append(self._ids[lo:hi])
            tfs.append(self._tfs[lo:hi])
        for more_ids, more_tfs in self._overlay.get(termid, ()):
            ids.append(more_ids)
            tfs.append(more_tfs)
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        all_ids, all_tfs = np.concatenate(ids), np.concatenate(tfs)
        keep = self._alive[all_ids]
        return all_ids[keep], all_tfs[keep]

    def search(
        self,
        con: duckdb.DuckDBPyConnection,
        terms: Sequence[str],
        *,
        limit: int,
        only_ids: Sequence[int] | None = None,
        weights: QueryWeights | None = None,
    ) -> list[tuple[int, float, float, float]]:
        """Same contract and scores as :func:`mnemo.index.fts.search` (``weights`` too)."""
        if not terms or (only_ids is not None and not only_ids):
            return []
        weights = weights or query_weights(con, terms)
        if weights is None:
            return []
        idf, total, avgdl = weights.idf, weights.total, weights.avgdl
        with self._lock:
            if not self._loaded:
                self._load(con)
            parts = [(self._postings(termid), weight) for termid, weight in idf.items()]
            length = self._length
        ids = np.concatenate([p[0][0] for p in parts])
        if not len(ids):
            return []
        tfs = np.concatenate([p[0][1] for p in parts]).astype(np.float64)
        per_posting = np.concatenate([np.full(len(p[0][0]), p[1]) for p in parts])
        lengths = length[ids].astype(np.float64)
        bm25 = per_posting * tfs * (K1 + 1) / (tfs + K1 * (1 - B + B * lengths / avgdl))
        if len(length) > max(DENSE_FACTOR * len(ids), SORTED_PAST):  # ids spread far wider
            unique, inverse = np.unique(ids, return_inverse=True)
            scores = np.bincount(inverse, weights=bm25)
            covered = np.bincount(inverse, weights=per_posting)
            order = best_first(unique, scores, limit, only_ids)
            return [(int(unique[i]), float(scores[i]), float(covered[i]), total) for i in order]
        # Chunk ids are dense (``length`` is indexed by them): scores summed into arrays by id, not
        # through ``np.unique``'s sort of every posting (~1.5 ms a search at 2,000 notes).
        scores = np.bincount(ids, weights=bm25, minlength=len(length))
        covered = np.bincount(ids, weights=per_posting, minlength=len(length))
        chosen, chosen_scores = best_of_dense(scores, 0, limit, only_ids)
        return [
            (int(cid), float(score), float(covered[cid]), total)
            for cid, score in zip(chosen.tolist(), chosen_scores.tolist(), strict=True)
        ]


def _narrow(ids: np.ndarray) -> np.ndarray:
    """Chunk ids as int32 while they fit (half the memory: ~2 postings per token of the workspace)."""
    return ids.astype(np.int32) if not len(ids) or int(ids.max()) < 2**31 else ids


def best_first(
    unique: np.ndarray, scores: np.ndarray, limit: int, only_ids: Sequence[int] | None
) -> np.ndarray:
    """Positions in ``unique`` (chunk ids, ascending) to return, best score first: every chunk of
    ``only_ids`` when given, else the ``limit`` best (ties keep id order)."""
    if only_ids is not None:
        keep = np.flatnonzero(np.isin(unique, np.asarray(only_ids, np.int64)))
        return keep[np.argsort(-scores[keep], kind="stable")]
    return best_positions(unique, scores, max(int(limit), 0))


def best_of_dense(
    dense: np.ndarray, lo: int, limit: int, only_ids: Sequence[int] | None
) -> tuple[np.ndarray, np.ndarray]:
    """The chunk ids and scores to return from ``dense`` (scores by chunk id - ``lo``; 0: no posting),
    best first, ties by id: as :func:`best_first` orders them, from scores summed into an array by
    chunk id (no sort of the postings)."""
    if only_ids is not None:
        wanted = np.unique(np.asarray(only_ids, np.int64)) - lo
        wanted = wanted[(wanted >= 0) & (wanted < len(dense))]
        top = wanted[dense[wanted] > 0]
        top = top[np.lexsort((top, -dense[top]))]
    else:  # every share and every IDF is > 0: a score of 0 is no posting
        top = best_in_dense(dense, int(limit))
    return top + lo, dense[top]
