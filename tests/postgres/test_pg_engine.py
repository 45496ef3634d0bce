"""The PostgreSQL engine itself: BM25 equal to DuckDB's, idempotent per-file writes, claimed pending
chunks, versioned migrations, and generations swapped for another model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.embeddings.factory import NoneEmbedder
from mnemo.errors import IndexUnavailable
from mnemo.index import pg_build, pg_indexer, pg_schema
from mnemo.index.api import IndexReader
from mnemo.index.indexer import Indexer
from mnemo.index.pg_connect import connect
from mnemo.index.pg_indexer import PgIndexer
from mnemo.index.pg_store import FileWrite, PgStore
from mnemo.index.writer_api import ChunkRow, FileMeta
from mnemo.text.terms import query_terms, terms_string
from mnemo.workspace.layout import Workspace
from tests.conftest import SAMPLE_NOTES, HashEmbedder, write_files
from tests.postgres.cluster import free_port as _free_port
from tests.postgres.helpers import check_pg_consistent, fresh_database


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on."""
    return _free_port()


QUERIES = [
    "billing database",
    "PostgreSQL row-level security",
    "API 设计评审",
    "数据库集群迁移",
    "deploy staging migration config",
    "tomatoes 服务器",
]


def _pg(root: Path, dsn: str, namespace: str, embedder: HashEmbedder) -> PgIndexer:
    return PgIndexer(
        Workspace(root, ignore=[".mnemo"]),
        embedder,
        IndexSettings(),
        ChunkingSettings(),
        dsn=dsn,
        namespace=namespace,
    )


@contextlib.contextmanager
def _both(tmp_path: Path, dsn: str, namespace: str) -> Iterator[tuple[IndexReader, IndexReader]]:
    """Readers of the sample notes indexed by DuckDB and by PostgreSQL with the same embedder."""
    write_files(tmp_path, SAMPLE_NOTES)
    embedder = HashEmbedder(dims=16, model=f"hash@{namespace}")
    duck = Indexer(Workspace(tmp_path, ignore=[".mnemo"]), embedder, IndexSettings(), ChunkingSettings())
    pg = _pg(tmp_path, dsn, namespace, embedder)
    try:
        duck.sync()
        pg.sync()
        with duck.reading() as d, pg.reading() as p:
            assert d is not None and p is not None
            yield d, p
    finally:
        duck.close()
        pg.close()


def _keys(reader: IndexReader, ids: list[int]) -> dict[int, str]:
    return {cid: r.key for cid, r in reader.records(ids).items()}


def test_keyword_scores_and_neighbours_equal_duckdb(tmp_path: Path, pg_dsn: str, namespace: str) -> None:
    with _both(tmp_path, pg_dsn, namespace) as (duck, pg):
        assert pg.counts() == duck.counts()
        for query in QUERIES:
            terms = query_terms(query)
            d_hits, p_hits = duck.keyword_top(terms, 20), pg.keyword_top(terms, 20)
            assert d_hits, query
            d_keys = _keys(duck, [h.chunk_id for h in d_hits])
            p_keys = _keys(pg, [h.chunk_id for h in p_hits])
            want = {d_keys[h.chunk_id]: (h.bm25, h.covered, h.total) for h in d_hits}
            got = {p_keys[h.chunk_id]: (h.bm25, h.covered, h.total) for h in p_hits}
            assert set(got) == set(want), query
            for key, scores in want.items():
                assert got[key] == pytest.approx(scores, rel=1e-9), (query, key)
        vector = HashEmbedder(dims=16).embed(["billing database review"])[0]
        d_near, p_near = duck.nearest(vector, 5), pg.nearest(vector, 5)
        assert [round(h.distance, 5) for h in p_near] == [round(h.distance, 5) for h in d_near]


def _row(key: str, text: str, start: int) -> ChunkRow:
    return ChunkRow(
        key, "memory/a.md", "memory", "evergreen", None, start, start + 1, "A", text, terms_string(text), key
    )


def _write(digest: str, rows: list[ChunkRow], vectors: dict[str, np.ndarray] | None = None) -> FileWrite:
    return FileWrite(
        "memory/a.md", "evergreen", "memory", None, digest, 1.0, 10, None, FileMeta(), rows, vectors or {}
    )


@pytest.fixture
def store(pg_dsn: str, namespace: str) -> Iterator[PgStore]:
    con = connect(pg_dsn, vectors=False)
    pg_schema.migrate(con)
    con.close()
    con = connect(pg_dsn)
    with con.transaction():
        pg_schema.namespace_lock(con, namespace)
        made = pg_schema.create_generation(con, namespace, "fake", f"m@{namespace}", 4, "c", live=True)
    yield PgStore(con, made)
    con.close()


def test_a_file_is_written_once_per_content_and_keeps_unchanged_chunks(
    store: PgStore, pg_dsn: str, namespace: str
) -> None:
    one, two = _row("k1", "lighthouse keeper", 1), _row("k2", "zeppelin harbour", 3)
    first = store.replace_file(_write("d1", [one, two]))
    assert (first.written, first.inserted, first.pending) == (True, 2, 2)
    again = store.replace_file(_write("d1", [one, two]))
    assert not again.written, "the committed content is already this one: nothing is written"
    ids = {k: s.id for k, s in store.chunk_keys("memory/a.md").items()}
    moved = _row("k2", "zeppelin harbour", 7)
    edited = store.replace_file(_write("d2", [moved, _row("k3", "new calibration", 9)]))
    assert (edited.kept, edited.inserted) == (1, 1)
    after = store.chunk_keys("memory/a.md")
    assert set(after) == {"k2", "k3"} and after["k2"].id == ids["k2"], "a kept chunk keeps its id"
    assert check_pg_consistent(pg_dsn, namespace) == {"files": 1, "chunks": 2}


def test_two_writers_never_claim_the_same_pending_chunk(store: PgStore, pg_dsn: str) -> None:
    store.replace_file(_write("d1", [_row(f"k{i}", f"note number {i}", i * 2) for i in range(8)]))
    other_con = connect(pg_dsn)
    try:
        other = PgStore(other_con, store.generation)
        mine = store.pending_batch(3)
        theirs = other.pending_batch(3)
        assert len(mine) == len(theirs) == 3 and not {c.id for c in mine} & {c.id for c in theirs}
        with store.transaction():  # committing the vectors ends the claims
            assert store.fill_vectors(mine, np.ones((3, 4), np.float32)) == 3
        rest = store.pending_batch(8)
        assert {c.id for c in rest}.isdisjoint({c.id for c in mine} | {c.id for c in theirs})
        assert len(rest) == 2, "the other writer's claims still stand"
        assert store.counts().pending == 5
    finally:
        other_con.close()


def test_migrations_run_once_and_a_newer_schema_is_refused(pg_dsn: str) -> None:
    con = connect(fresh_database(pg_dsn, "mnemo_migrations"), vectors=False)
    try:
        assert pg_schema.migrate(con) == 0
        assert pg_schema.migrate(con) == pg_schema.LATEST, "a second run finds everything applied"
        rows = con.execute("SELECT version FROM mnemo.migrations ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [v for v, _, _ in pg_schema.MIGRATIONS]
        con.execute(
            "INSERT INTO mnemo.migrations(version, note) VALUES (%s, 'from the future')",
            [pg_schema.LATEST + 1],
        )
        with pytest.raises(IndexUnavailable, match="newer than this mnemo"):
            pg_schema.migrate(con)
    finally:
        con.close()


def test_another_model_reads_keyword_only_until_mnemo_index_swaps_a_generation(
    tmp_path: Path, pg_dsn: str, namespace: str
) -> None:
    write_files(tmp_path, SAMPLE_NOTES)
    first = _pg(tmp_path, pg_dsn, namespace, HashEmbedder(dims=16, model=f"a@{namespace}"))
    second = _pg(tmp_path, pg_dsn, namespace, HashEmbedder(dims=8, model=f"b@{namespace}"))
    try:
        assert first.sync().rebuilt
        assert first.store is not None
        before = first.store.g
        second.sync(replace="chunker")  # the editor's default: another model is not replaced
        assert second.foreign and second.vector_dims() == 0
        note = second.mismatch_note()
        assert note is not None and "keyword-only" in note and "mnemo index" in note
        report = second.sync(replace="any")  # what `mnemo index` asks
        assert report.rebuilt and not second.foreign and second.vector_dims() == 8
        with first.reading() as reader:  # the other process follows the swap
            assert reader is not None and reader.identity.dims == 8
        assert first.foreign
        assert check_pg_consistent(pg_dsn, namespace)["files"] == len(SAMPLE_NOTES)
        assert second.store is not None
        live = second.store.g
        with psycopg.connect(pg_dsn) as con:
            assert pg_schema.has_vector_index(con, live), "built once the vectors were in"
            names = [
                r[0]
                for r in con.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'chunks_hnsw_g%'")
            ]
            assert pg_schema.hnsw_index_name(live) in names
            assert pg_schema.hnsw_index_name(before) not in names, "the old generation's index is dropped"
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):  # a few rows: show the
                con.execute(f"SET {setting} = off")  # HNSW index matches the query, whatever it costs
            plan = "\n".join(
                r[0]
                for r in con.execute(
                    f"EXPLAIN SELECT id FROM mnemo.chunks WHERE g = {live} AND embedding IS NOT NULL "
                    f"ORDER BY {pg_schema.vector_expression(8)} <=> %s::vector LIMIT 5",
                    [str([0.1] * 8)],
                )
            )
        assert pg_schema.hnsw_index_name(live) in plan, plan
    finally:
        first.close()
        second.close()


def test_the_dsn_and_its_password_never_appear_in_errors(tmp_path: Path, free_port: int) -> None:
    workspace = Workspace(tmp_path, ignore=[".mnemo"])
    with pytest.raises(IndexUnavailable) as malformed:
        PgIndexer(
            workspace,
            HashEmbedder(),
            IndexSettings(),
            ChunkingSettings(),
            dsn="host=x password=s3cret =oops",
            namespace="n",
        )
    unreachable = PgIndexer(
        workspace,
        HashEmbedder(),
        IndexSettings(),
        ChunkingSettings(),
        dsn=f"postgresql://alice:s3cret@127.0.0.1:{free_port}/mnemo?connect_timeout=2",
        namespace="n",
    )
    with pytest.raises(IndexUnavailable) as refused:
        unreachable.sync()
    for error in (malformed.value, refused.value):
        assert "s3cret" not in str(error) and "MNEMO_PG_DSN" in str(error), str(error)


def _visible(con: psycopg.Connection) -> tuple[int, int]:
    row = con.execute(
        "SELECT relpages, relallvisible FROM pg_class WHERE oid = 'mnemo.postings'::regclass"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_postings_held_back_from_the_visibility_map_are_vacuumed_by_the_next_sync(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot older than a build (autovacuum's ANALYZE, a reader elsewhere) keeps the build's vacuum
    from marking the postings' pages all-visible; index-only scans then visit the heap for each posting.
    The next sync vacuums them again, and a term's postings are read without a heap fetch."""
    dsn = fresh_database(pg_dsn, "visibility")
    with psycopg.connect(dsn, autocommit=True) as admin:  # the server's default (the test cluster's is off,
        # and a page of rows whose commit is not yet flushed cannot be marked either, for a moment)
        admin.execute("ALTER DATABASE visibility SET synchronous_commit = on")
    notes = {
        f"memory/topic-{i}.md": f"# Topic {i}\n\n" + "billing database review notes " * 40 for i in range(150)
    }
    write_files(tmp_path, notes)
    con = connect(dsn, vectors=False)
    pg_schema.migrate(con)
    old = connect(dsn, vectors=False)
    old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    old.execute("SELECT count(*) FROM mnemo.generations").fetchone()  # the snapshot is taken here
    # keyword only: a build with vectors ends in CREATE INDEX CONCURRENTLY, which waits for old snapshots
    indexer = PgIndexer(
        Workspace(tmp_path, ignore=[".mnemo"]), NoneEmbedder(), IndexSettings(), ChunkingSettings(),
        dsn=dsn, namespace="visible",
    )  # fmt: skip
    try:
        indexer.sync()
        pages, visible = _visible(con)
        assert pages > 0 and visible < 0.9 * pages, "the old snapshot should have held the vacuum back"
        old.execute("ROLLBACK")
        indexer.sync()
        pages, visible = _visible(con)
        assert visible >= 0.9 * pages
        plan = con.execute(
            "EXPLAIN (ANALYZE) SELECT count(*) FROM mnemo.postings WHERE g = %s AND term = 'bill'",
            [indexer.store.g if indexer.store else 0],
        ).fetchall()
        assert "Heap Fetches: 0" in "\n".join(r[0] for r in plan)
        tried: list[object] = []
        monkeypatch.setattr(pg_build, "keep_visible", tried.append)
        indexer.sync()
        assert tried == [], "one vacuum per VACUUM_EVERY_S at most (a snapshot held for hours: in vain)"
        monkeypatch.setattr(pg_indexer, "VACUUM_EVERY_S", 0.0)
        indexer.sync()
        assert len(tried) == 1
    finally:
        indexer.close()
        old.close()
        con.close()
