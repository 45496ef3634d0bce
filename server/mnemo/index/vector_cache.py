"""VectorCache: the writer's chunk vectors in memory, one matrix: a candidate's vector without SQL, and
the exact nearest neighbours of a query while the index has no HNSW index.

A hybrid search needs the vectors of its keyword candidates that the nearest-neighbour query did not
return. Reading them from DuckDB scans the wide embedding column for every search (several ms at 2,000
notes); a row of the matrix costs microseconds. The cache is loaded on first use from the committed
rows and kept current after each commit from the ids the transaction touched (inserted, deleted, or
given a vector), the way :class:`mnemo.index.postings.PostingsCache` keeps BM25 postings. Above
:data:`LIMIT_BYTES` of vectors it stays off and the reader asks DuckDB as before.

Up to :data:`mnemo.index.pending.EXACT_SEARCH_BYTES` of vectors the index has no HNSW index at all
(:func:`mnemo.index.pending.settle_vector_index`) and :meth:`VectorCache.nearest` compares the query
with every row: one matrix product, ~1 ms at 7,000 chunks, exact, where DuckDB's HNSW index took ~3 ms,
held a second copy of the vectors (~23 MB at 2,000 notes) and can be damaged by a crash
(:mod:`mnemo.index.repair`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from mnemo.index.duckdb_native import duckdb, id_ranges, sql_ids
from mnemo.index.nearest_across import Nearest, block_rows, matched, nearest_in_block

LIMIT_BYTES = 96 * 1024 * 1024
"""Most memory the cache may take (~65,000 chunks of 384-dim vectors): bigger indexes read from DuckDB."""

HEADROOM = 16
"""Rows loaded get 1/16 more spare rows: without, a server's first edit that added a chunk grew the full
matrix by a quarter, a second copy at once (+14 MB at 2,000 notes, the peak of an edit)."""

_LOAD_ROWS = 512
"""Rows read per query while loading, on average: each row arrives as its own small array, copied into
the matrix a page at a time. The pages are ranges of ids, not ``ORDER BY id LIMIT``: DuckDB then streams
the scan instead of keeping a top-N of wide rows (2,000 notes: ~20 MB less at the peak of a load, and
faster). Pages of 512 rather than 2,048 took ~10 MB off the load's peak at 2,000 notes (the process's
heap grows by what one page's result and arrays hold) for ~50 ms more over the whole load."""


def _fetch(
    con: duckdb.DuckDBPyConnection, where: str = "", params: Sequence[object] = ()
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(ids, vectors) of the chunks with a vector matching ``where``, in no particular order."""
    sql = f"SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL{where}"
    found = con.execute(sql, list(params)).fetchnumpy()
    return np.asarray(found["id"], np.int64), list(found["embedding"])


class VectorCache:
    def __init__(self, dims: int, limit_bytes: int = LIMIT_BYTES) -> None:
        self.dims = dims
        self.limit_bytes = limit_bytes
        self.exact = False
        """Whether searches take their nearest neighbours from here (the index has no HNSW index; the
        store sets it whenever it creates, drops or finds one)."""
        self._lock = threading.Lock()
        self._loaded = False
        self._off = dims == 0
        self._matrix = np.zeros((0, max(dims, 1)), np.float32)
        self._inverse_norms = np.zeros(0, np.float32)
        """1 / the row's norm; 0 for a free row (and a zero vector), which then never comes first."""
        self._ids = np.zeros(0, np.int64)
        """Chunk id of each row; -1 for a free row."""
        self._row: dict[int, int] = {}
        self._free: list[int] = []
        self._end = 0
        """Rows ever used (the matrix's rows past it are spare capacity)."""
        self._version = 0
        """Bumped whenever a row changes: a pass that lets go of the lock between blocks
        (:meth:`nearest_across`) sees the rows move."""

    @property
    def holds_all(self) -> bool:
        """Every vector of the index is here (loaded, and not off)."""
        return self._loaded and not self._off

    def held(self) -> int | None:
        """How many vectors the index has, when this cache holds every one (None otherwise)."""
        with self._lock:
            return len(self._row) if self.holds_all else None

    def invalidate(self) -> None:
        with self._lock:
            self._reset()
            self._off = self.dims == 0

    def _reset(self) -> None:
        self._version += 1
        self._loaded = False
        self._matrix = np.zeros((0, max(self.dims, 1)), np.float32)
        self._inverse_norms = np.zeros(0, np.float32)
        self._ids = np.zeros(0, np.int64)
        self._row, self._free, self._end = {}, [], 0

    # -- loading and deltas --------------------------------------------------------------------------
    def load(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Load every vector now, when not yet loaded; False when the cache is off."""
        with self._lock:
            return self._ready(con)

    def _ready(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Load on first use (the lock is held); False when the cache is off."""
        if self._off:
            return False
        if self._loaded:
            return True
        count, low, high = con.execute(
            "SELECT count(embedding), min(id), max(id) FROM chunks WHERE embedding IS NOT NULL"
        ).fetchone() or (0, None, None)
        if int(count) * self.dims * 4 > self.limit_bytes:
            self._off = True
            return False
        self._grow(int(count) + int(count) // HEADROOM + 64)  # a server's first edits fit
        if count:
            for start, stop in id_ranges(int(count), int(low), int(high), _LOAD_ROWS):
                self._put_page(*_fetch(con, " AND id >= ? AND id < ?", [start, stop]))
        self._loaded = True
        return True

    def _put_page(self, ids: np.ndarray, vectors: list[np.ndarray]) -> None:
        """Append a page of rows new to the cache (a load: the pages' ids are distinct)."""
        if not len(ids):
            return
        self._version += 1
        first, stop = self._end, self._end + len(ids)
        self._grow(stop)
        block = self._matrix[first:stop]
        block[:] = np.stack(vectors)
        norms = np.linalg.norm(block, axis=1)
        self._inverse_norms[first:stop] = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        self._ids[first:stop] = ids
        self._row.update(zip(ids.tolist(), range(first, stop), strict=True))
        self._end = stop

    def _grow(self, rows: int) -> None:
        if rows <= len(self._matrix):
            return
        self._version += 1
        capacity = max(rows, len(self._matrix) * 5 // 4 + 64)
        matrix = np.zeros((capacity, self.dims), np.float32)
        matrix[: self._end] = self._matrix[: self._end]
        self._matrix = matrix
        self._inverse_norms = np.concatenate(
            [self._inverse_norms, np.zeros(capacity - len(self._inverse_norms), np.float32)]
        )
        self._ids = np.concatenate([self._ids, np.full(capacity - len(self._ids), -1, np.int64)])

    def _put(self, cid: int, vector: np.ndarray) -> None:
        self._version += 1
        row = self._row.get(cid)
        if row is None:
            if self._free:
                row = self._free.pop()
            else:
                self._grow(self._end + 1)
                row, self._end = self._end, self._end + 1
            self._row[cid] = row
            self._ids[row] = cid
        values = np.asarray(vector, dtype=np.float32)
        self._matrix[row] = values
        norm = float(np.linalg.norm(values))
        self._inverse_norms[row] = 1.0 / norm if norm > 0 else 0.0

    def _drop(self, cid: int) -> None:
        row = self._row.pop(cid, None)
        self._version += 1
        if row is not None:
            self._ids[row] = -1
            self._inverse_norms[row] = 0.0
            self._free.append(row)

    def apply(self, con: duckdb.DuckDBPyConnection, changed: Iterable[int]) -> None:
        """Bring a loaded cache up to date after a commit that inserted, deleted or filled the chunks
        ``changed`` (``con`` sees the committed rows)."""
        ids = sorted(set(changed))
        with self._lock:
            if not self._loaded or not ids:
                return
            fresh_ids, fresh = _fetch(con, f" AND id IN ({sql_ids(ids)})")
            given = dict(zip(fresh_ids.tolist(), fresh, strict=True))
            for cid in ids:
                vector = given.get(cid)
                if vector is None:
                    self._drop(cid)
                else:
                    self._put(cid, vector)
            if len(self._row) * self.dims * 4 > self.limit_bytes:
                self._reset()
                self._off = True

    # -- reading -------------------------------------------------------------------------------------
    def get(self, con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> dict[int, np.ndarray] | None:
        """The vectors of ``ids`` that have one (rows of one copy, gathered at once: a diagnostics pass
        asks for every memory chunk, and 7,000 small copies stayed on the heap); None when the cache
        is off (the caller asks DuckDB)."""
        with self._lock:
            if not self._ready(con):
                return None
            rows = [(cid, self._row[cid]) for cid in ids if cid in self._row]
            block = self._matrix[[row for _, row in rows]]
            return {cid: block[i] for i, (cid, _) in enumerate(rows)}

    def nearest_across(self, con: duckdb.DuckDBPyConnection, groups: Mapping[int, int]) -> Nearest | None:
        """For each chunk of ``groups`` (chunk id -> group, >= 0) with a vector: the chunk of another
        group most similar to it, and their cosine (:mod:`mnemo.index.nearest_across`); None when the
        cache is off. Worked out on the matrix itself, a block of rows at a time: the lock is held for one
        block (searches wait milliseconds, not the whole pass), and the rows' groups are laid out again
        when a commit moved rows in between."""
        ids = list(groups)
        out: Nearest = {}
        layout: tuple[int, np.ndarray] | None = None  # (version, group of each row; -1: none)
        done = 0
        while done < len(ids):
            with self._lock:
                if not self._ready(con):
                    return None
                if layout is None or layout[0] != self._version:
                    row_groups = np.full(self._end, -1, np.int64)
                    for cid, group in groups.items():
                        row = self._row.get(cid)
                        if row is not None:
                            row_groups[row] = group
                    layout = (self._version, row_groups)
                step = block_rows(self._end)
                block = [cid for cid in ids[done : done + step] if cid in self._row]
                if block:
                    rows = np.array([self._row[cid] for cid in block], np.int64)
                    end = self._end
                    best, cosine = nearest_in_block(
                        self._matrix[:end], self._inverse_norms[:end], layout[1], rows
                    )
                    out.update(matched(block, self._ids, best, cosine))
            done += step
        return out

    def nearest(
        self,
        con: duckdb.DuckDBPyConnection,
        query: np.ndarray,
        limit: int,
        within: Sequence[int] | None = None,
    ) -> list[tuple[int, float]] | None:
        """(chunk id, cosine distance) of the ``limit`` rows nearest ``query``, nearest first (ties by
        id), among ``within`` when given; None when the cache is off. Exact: every row is compared."""
        with self._lock:
            if not self._ready(con):
                return None
            norm = float(np.linalg.norm(query))
            if limit <= 0 or not self._row or norm == 0:
                return []
            q = np.asarray(query, dtype=np.float32) / np.float32(norm)
            alive = len(self._row)
            if within is None:  # every row: the matrix as it is (no copy), free rows last
                ids = self._ids[: self._end].copy()
                similarity = (self._matrix[: self._end] @ q) * self._inverse_norms[: self._end]
                similarity[ids < 0] = -np.inf
            else:
                rows = np.asarray([self._row[cid] for cid in within if cid in self._row], np.int64)
                ids = self._ids[rows]
                similarity = (self._matrix[rows] @ q) * self._inverse_norms[rows]
        k = min(int(limit), alive if within is None else len(ids))
        if k <= 0:
            return []
        top = np.argpartition(-similarity, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        order = top[np.lexsort((ids[top], -similarity[top]))]
        return [(int(ids[i]), float(1.0 - similarity[i])) for i in order]
