"""VectorCache: the writer's chunk vectors in memory, so a search reads a candidate's vector without SQL.

A hybrid search needs the vectors of its keyword candidates that the nearest-neighbour query did not
return. Reading them from DuckDB scans the wide embedding column for every search (several ms at 2,000
notes); a dict lookup costs microseconds. The cache is loaded on first use from the committed rows and
kept current after each commit from the ids the transaction touched (inserted, deleted, or given a
vector), the way :class:`mnemo.index.postings.PostingsCache` keeps BM25 postings. Above
:data:`LIMIT_BYTES` of vectors it stays off and the reader asks DuckDB as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import duckdb
import numpy as np

LIMIT_BYTES = 96 * 1024 * 1024
"""Most memory the cache may take (~65,000 chunks of 384-dim vectors): bigger indexes read from DuckDB."""


def _fetch(con: duckdb.DuckDBPyConnection, where: str) -> dict[int, np.ndarray]:
    found = con.execute(f"SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL{where}").fetchnumpy()
    return {
        int(cid): np.asarray(vector, dtype=np.float32)
        for cid, vector in zip(found["id"].tolist(), found["embedding"], strict=True)
    }


class VectorCache:
    def __init__(self, dims: int, limit_bytes: int = LIMIT_BYTES) -> None:
        self.dims = dims
        self.limit_bytes = limit_bytes
        self._lock = threading.Lock()
        self._vectors: dict[int, np.ndarray] | None = None
        """Chunk id -> vector of every chunk that has one; None: not loaded (or too big to hold)."""
        self._off = dims == 0

    def invalidate(self) -> None:
        with self._lock:
            self._vectors = None
            self._off = self.dims == 0

    def get(self, con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> dict[int, np.ndarray] | None:
        """The vectors of ``ids`` that have one; None when the cache is off (the caller asks DuckDB)."""
        with self._lock:
            if self._off:
                return None
            if self._vectors is None:
                (count,) = con.execute("SELECT count(embedding) FROM chunks").fetchone() or (0,)
                if int(count) * self.dims * 4 > self.limit_bytes:
                    self._off = True
                    return None
                self._vectors = _fetch(con, "")
            vectors = self._vectors
            return {cid: vectors[cid] for cid in ids if cid in vectors}

    def apply(self, con: duckdb.DuckDBPyConnection, changed: Iterable[int]) -> None:
        """Bring a loaded cache up to date after a commit that inserted, deleted or filled the chunks
        ``changed`` (``con`` sees the committed rows)."""
        ids = sorted(set(changed))
        with self._lock:
            if self._vectors is None or not ids:
                return
            listed = ", ".join(str(int(i)) for i in ids)
            fresh = _fetch(con, f" AND id IN ({listed})")
            for cid in ids:
                vector = fresh.get(cid)
                if vector is None:
                    self._vectors.pop(cid, None)
                else:
                    self._vectors[cid] = vector
            if len(self._vectors) * self.dims * 4 > self.limit_bytes:
                self._vectors, self._off = None, True
