"""The vector half of a search, past what is searched in memory, must run as an HNSW index scan (vss),
not a full sort (the in-memory search of smaller indexes: tests/unit/test_exact_vectors.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mnemo.index import pending
from mnemo.index.reader_sql import vector_literal, vector_query
from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity


def _store(tmp_path: Path, n: int = 50, dims: int = 8) -> tuple[ChunkStore, np.ndarray]:
    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("test", "m", dims, "c"))
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(n, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [
        ChunkRow(f"k{i}", f"memory/n{i}.md", "memory", "evergreen", None, 1, 1, "", f"t{i}", f"t{i}", f"h{i}")
        for i in range(n)
    ]
    store.insert_chunks(rows, vectors, live=False)
    store.finish_indexes()
    return store, vectors


def test_vector_query_uses_the_hnsw_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pending, "EXACT_SEARCH_BYTES", 8 * 4 * 40)  # 40 vectors of 8 dims: 50 are past it
    store, vectors = _store(tmp_path)
    assert pending.has_vector_index(store.con) and not store.vector_cache.exact
    plan = store.con.execute("EXPLAIN " + vector_query(vector_literal(vectors[0]), 5)).fetchall()[0][1]
    assert "HNSW_INDEX_SCAN" in plan


def test_vector_query_returns_the_nearest_by_cosine(tmp_path: Path) -> None:
    store, vectors = _store(tmp_path)
    query = vectors[7]
    rows = store.con.execute(vector_query(vector_literal(query), 3)).fetchall()
    exact = np.argsort(-(vectors @ query))[:3]
    ids = {row[0] for row in store.con.execute("SELECT id FROM chunks ORDER BY id").fetchall()}
    by_position = sorted(ids)
    assert rows[0][0] == by_position[int(exact[0])]
    assert abs(rows[0][1]) < 1e-5  # distance to itself
    assert rows[0][1] <= rows[1][1] <= rows[2][1]


def test_vector_literal_round_trips_float32(tmp_path: Path) -> None:
    store, vectors = _store(tmp_path, n=3)
    value = store.con.execute(f"SELECT {vector_literal(vectors[1])}").fetchone()
    assert value is not None
    assert np.allclose(np.asarray(value[0], dtype=np.float32), vectors[1])
