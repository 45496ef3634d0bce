"""Vectors that fit in memory are searched exactly there, with no HNSW index; past that, the HNSW index.

The writer holds its vectors in one matrix (:class:`mnemo.index.vector_cache.VectorCache`); up to
:data:`mnemo.index.pending.EXACT_SEARCH_BYTES` the index has no HNSW index and a search compares the
query with every vector: the answer must be DuckDB's exact cosine ranking, kept current through edits,
with a filter, and an older index of few vectors loses its HNSW index when opened.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import HashEmbedder

from mnemo.config import load_settings
from mnemo.index import pending
from mnemo.index.reader_sql import vector_literal
from mnemo.index.store import ChunkRow, ChunkStore, IndexIdentity
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

DIMS = 8


def _rows(n: int, start: int = 0) -> list[ChunkRow]:
    return [
        ChunkRow(f"k{i}", f"memory/n{i}.md", "memory", "evergreen", None, 1, 1, "", f"t{i}", f"t{i}", f"h{i}")
        for i in range(start, start + n)
    ]


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIMS)).astype(np.float32)


def _store(tmp_path: Path, n: int = 60) -> ChunkStore:
    store = ChunkStore.create(tmp_path / "index.duckdb.building", IndexIdentity("test", "m", DIMS, "c"))
    store.insert_chunks(_rows(n), _vectors(n, 1), live=False)
    store.finish_indexes()
    return store


def _duckdb_exact(
    store: ChunkStore, query: np.ndarray, ids: list[int] | None = None
) -> list[tuple[int, float]]:
    where = f"WHERE id IN ({', '.join(map(str, ids))}) " if ids else ""
    rows = store.con.execute(
        f"SELECT id, array_cosine_distance(embedding, {vector_literal(query)}) AS d FROM chunks {where}"
        "ORDER BY d, id"
    ).fetchall()
    return [(int(i), float(d)) for i, d in rows]


def _nearest(
    store: ChunkStore, query: np.ndarray, limit: int, within: list[int] | None = None
) -> list[tuple[int, float]]:
    reader = store.read_with(store.reader())
    return [(hit.chunk_id, hit.distance) for hit in reader.nearest(query, limit, within=within)]


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [i for i, _ in got] == [i for i, _ in want]
    assert np.allclose([d for _, d in got], [d for _, d in want], atol=1e-5)


def test_a_small_index_has_no_hnsw_index_and_searches_exactly_in_memory(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert not pending.has_vector_index(store.con)
    assert store.vector_cache.exact
    for seed in range(5):
        query = _vectors(1, 100 + seed)[0]
        _same(_nearest(store, query, 7), _duckdb_exact(store, query)[:7])
    query = _vectors(1, 7)[0]
    allowed = [3, 9, 10, 44, 58]
    _same(_nearest(store, query, 3, within=allowed), _duckdb_exact(store, query, allowed)[:3])
    _same(_nearest(store, query, 100), _duckdb_exact(store, query))  # all 60, in order


def test_edits_reach_the_in_memory_search(tmp_path: Path) -> None:
    store = _store(tmp_path, n=20)
    query = _vectors(1, 5)[0]
    _nearest(store, query, 5)  # loaded
    ids = [int(r[0]) for r in store.con.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
    with store.transaction():
        store.delete_chunks(ids[:8])
    near = np.vstack([query * 2.0, _vectors(9, 6)]).astype(np.float32)  # the first points at the query
    with store.transaction():
        store.insert_chunks(_rows(10, start=100), near, live=True)
    got = _nearest(store, query, 20)
    _same(got, _duckdb_exact(store, query)[:20])
    assert not set(ids[:8]) & {i for i, _ in got}
    assert got[0][1] == pytest.approx(0.0, abs=1e-6)
    assert len(got) == 20 and len(_nearest(store, query, 100)) == 22


def test_past_the_limit_the_hnsw_index_is_built_and_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pending, "EXACT_SEARCH_BYTES", DIMS * 4 * 40)  # 40 vectors: 60 are past it
    store = _store(tmp_path)
    assert pending.has_vector_index(store.con)
    assert not store.vector_cache.exact
    query = _vectors(1, 3)[0]
    _same(_nearest(store, query, 5), _duckdb_exact(store, query)[:5])  # (an HNSW answer, exact here)


def test_the_hnsw_index_is_dropped_only_below_half_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pending, "EXACT_SEARCH_BYTES", DIMS * 4 * 40)
    store = _store(tmp_path)
    ids = [int(r[0]) for r in store.con.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
    store.con.execute(f"DELETE FROM chunks WHERE id IN ({', '.join(map(str, ids[:30]))})")  # 30 left
    assert pending.settle_vector_index(store.con, DIMS)  # 30 > 20: kept (no drop and rebuild around 40)
    store.con.execute(f"DELETE FROM chunks WHERE id IN ({', '.join(map(str, ids[30:45]))})")  # 15 left
    assert not pending.settle_vector_index(store.con, DIMS)
    assert not pending.has_vector_index(store.con)


def _service(root: Path) -> MemoryService:
    settings, problems = load_settings(root)
    return MemoryService(
        Workspace(root, ignore=[settings.index.dir]), settings, HashEmbedder(dims=32), problems
    )


def test_an_older_index_of_few_vectors_loses_its_hnsw_index_and_finds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    for n in range(12):
        (root / "memory" / f"n{n}.md").write_text(f"# Note {n}\n\nabout topic{n} and lighthouses\n", "utf-8")
    with monkeypatch.context() as old:  # built as before: an HNSW index at any size
        old.setattr(pending, "EXACT_SEARCH_BYTES", 0)
        memory = _service(root)
        memory.sync()
        assert memory.indexer.store is not None and pending.has_vector_index(memory.indexer.store.con)
        before = [(h.path, h.start_line) for h in memory.search("lighthouses topic3", min_score=0.0).results]
        memory.close()
    memory = _service(root)
    try:
        memory.sync()
        store = memory.indexer.store
        assert store is not None and not pending.has_vector_index(store.con) and store.vector_cache.exact
        after = [(h.path, h.start_line) for h in memory.search("lighthouses topic3", min_score=0.0).results]
        assert after == before and after[0][0] == "memory/n3.md"
    finally:
        memory.close()


def _log_emptied(wal: Path, timeout_s: float = 30.0) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not wal.exists() or wal.stat().st_size == 0:
            return True
        time.sleep(0.05)
    return False


def test_a_quiet_writer_checkpoints_what_it_holds_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows written since the last checkpoint stay in DuckDB's memory until one (~20 MB after five edits
    at 2,000 notes), and DuckDB checkpoints by itself only past 16 MB of log: once the writer has been
    quiet for a while (after a sync and its vectors, after a buffer edit), it checkpoints."""
    from mnemo.memory import background_vectors

    monkeypatch.setattr(background_vectors, "QUIET_S", 0.3)
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    for n in range(6):
        (root / "memory" / f"n{n}.md").write_text(f"# Note {n}\n\nabout topic{n}\n", "utf-8")
    memory = _service(root)
    wal = root / ".mnemo" / "index.duckdb.wal"
    try:
        memory.sync()
        memory.embed_in_background()
        (root / "memory" / "new.md").write_text("# New\n\nA later note about kites.\n", encoding="utf-8")
        memory.sync()  # the keyword side now, the vector from the embedding thread
        assert _log_emptied(wal)
        assert memory.vector_counts() == (7, 7)
        memory.schedule_buffer("memory/n2.md", "# Note 2\n\nabout topic2, edited in a buffer\n", delay_s=3600)
        memory.apply_pending()
        assert wal.exists() and wal.stat().st_size > 0  # (the edit is in the log, and in memory)
        assert _log_emptied(wal)
        assert memory.search("edited buffer", min_score=0.0).results[0].path == "memory/n2.md"
    finally:
        memory.close()


def test_the_cache_loads_every_vector_page_by_page_whatever_the_gaps_in_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading reads ranges of ids (DuckDB then streams its scan): ranges with no row, ranges past the
    average and chunks still without a vector must neither lose nor repeat a vector."""
    from mnemo.index import vector_cache

    store = _store(tmp_path, n=40)
    try:
        with store.transaction():  # gaps: every third chunk gone, a few chunks without a vector
            store.delete_chunks([i for i in range(1, 41) if i % 3 == 0])
            store.insert_chunks(_rows(5, start=100), _vectors(5, 2), live=True, pending=[True] * 5)
        want = {
            int(i): np.asarray(v, np.float32)
            for i, v in store.con.execute(
                "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL"
            ).fetchall()
        }
        monkeypatch.setattr(vector_cache, "_LOAD_ROWS", 4)
        cache = vector_cache.VectorCache(DIMS)
        got = cache.get(store.con, list(want))
        assert got is not None and set(got) == set(want) and len(cache._row) == len(want)
        for cid, vector in want.items():
            np.testing.assert_allclose(got[cid], vector)
    finally:
        store.con.close()


def test_a_page_loaded_at_once_keeps_each_rows_norm_and_a_zero_vector_never_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load copies a page of vectors into the matrix at once (not row by row): each row's inverse
    norm is the row's own, a zero vector gets 0 (it can never come first) and the exact search still
    equals DuckDB's."""
    from mnemo.index import vector_cache

    store = _store(tmp_path, n=30)
    try:
        with store.transaction():
            store.insert_chunks(_rows(1, start=200), np.zeros((1, DIMS), np.float32), live=True)
        monkeypatch.setattr(vector_cache, "_LOAD_ROWS", 8)
        query = _vectors(1, 7)[0]
        got = _nearest(store, query, 31)
        cache = store.vector_cache
        for cid, row in cache._row.items():
            vector = cache._matrix[row]
            norm = float(np.linalg.norm(vector))
            want = 1.0 / norm if norm > 0 else 0.0
            assert cache._ids[row] == cid
            assert cache._inverse_norms[row] == pytest.approx(want, rel=1e-5)
        zero_id = max(cache._row)
        assert cache._inverse_norms[cache._row[zero_id]] == 0.0
        assert got[0][0] != zero_id and zero_id in [cid for cid, _ in got]
        _same(
            [g for g in got if g[0] != zero_id], [w for w in _duckdb_exact(store, query) if w[0] != zero_id]
        )
    finally:
        store.con.close()


def test_a_loaded_cache_takes_a_few_new_chunks_without_copying_its_matrix(tmp_path: Path) -> None:
    """Loaded at its exact size, the matrix was grown (a second copy, +25%) by a server's first edit that
    added a chunk: the peak of an edit at 2,000 notes. It now loads with spare rows."""
    store = _store(tmp_path, n=200)
    try:
        query = _vectors(1, 5)[0]
        _nearest(store, query, 5)  # loaded
        matrix = store.vector_cache._matrix
        assert len(matrix) >= 200 + 200 // 16
        with store.transaction():
            store.insert_chunks(_rows(3, start=500), _vectors(3, 9), live=True)
        assert store.vector_cache._matrix is matrix
        _same(_nearest(store, query, 203), _duckdb_exact(store, query))
    finally:
        store.con.close()


def _cached_vectors(store: ChunkStore) -> dict[int, np.ndarray]:
    rows = store.con.execute("SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL").fetchall()
    return {int(i): np.asarray(v, np.float32) for i, v in rows}


def test_the_cache_pairs_chunks_across_groups_block_by_block_as_the_vectors_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace near-duplicate pass runs on the writer's matrix itself (a copy of every vector
    was ~11 MB at 2,000 notes, twice), a block of rows at a time: the answer must be the one worked out
    from the vectors, chunks outside the groups never being anyone's match."""
    from mnemo.index import nearest_across

    store = _store(tmp_path, n=60)
    try:
        monkeypatch.setattr(nearest_across, "BLOCK_FLOATS", 1)
        monkeypatch.setattr(nearest_across, "BLOCK_ROWS", 7)
        groups = {cid: cid % 5 for cid in range(3, 55)}  # chunks 1, 2 and 55-60 are in no group
        got = store.vector_cache.nearest_across(store.con, groups)
        want = nearest_across.nearest_across_vectors(_cached_vectors(store), groups)
        assert got is not None and set(got) == set(want) == set(groups)
        for cid, (match, cosine) in got.items():
            assert match in groups and groups[match] != groups[cid]
            assert cosine == pytest.approx(want[cid][1], abs=1e-5)
    finally:
        store.con.close()


def test_rows_moved_between_two_blocks_are_laid_out_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass lets go of the cache's lock between blocks, and a commit may drop a chunk and give its
    row to a new one meanwhile: the blocks after it must see the new layout, never pairing a chunk with
    the dropped one or the new one with the old chunk's group."""
    from mnemo.index import nearest_across, vector_cache

    store = _store(tmp_path, n=40)
    try:
        monkeypatch.setattr(nearest_across, "BLOCK_FLOATS", 1)
        monkeypatch.setattr(nearest_across, "BLOCK_ROWS", 8)
        cache = store.vector_cache
        groups = {cid: cid % 4 for cid in range(1, 41)}
        real = vector_cache.nearest_in_block
        calls: list[int] = []
        twin = _cached_vectors(store)[21]  # the new chunk: chunk 21's twin, in chunk 40's old row

        def commit_after_first(*args: object) -> object:
            result = real(*args)  # type: ignore[arg-type]
            if not calls:  # (the lock is held here, as a commit's apply would hold it)
                cache._drop(40)
                cache._put(99, twin)
            calls.append(1)
            return result

        monkeypatch.setattr(vector_cache, "nearest_in_block", commit_after_first)
        got = cache.nearest_across(store.con, groups)
        assert got is not None and len(calls) == 5
        later = {cid: pair for cid, pair in got.items() if cid > 8}  # the blocks after the commit
        assert 40 not in got and all(match not in (40, 99) for match, _ in later.values())
        vectors = {cid: v for cid, v in _cached_vectors(store).items() if cid != 40}
        want = nearest_across.nearest_across_vectors(vectors, {c: g for c, g in groups.items() if c != 40})
        for cid, (_, cosine) in later.items():
            assert cosine == pytest.approx(want[cid][1], abs=1e-5)
    finally:
        store.con.close()
