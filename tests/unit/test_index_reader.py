"""Contract tests of the index read API (:class:`mnemo.index.api.IndexReader`), engine by engine.

Every test takes ``reader_factory``, which indexes a temporary workspace with a real engine and hands
back the engine's writer and reader (:class:`Built`). Each entry of :data:`ENGINES` is one engine; another
engine (PostgreSQL) runs the same tests by adding itself there (its function may ask pytest for its own
fixtures through ``request.getfixturevalue``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from tests.conftest import HashEmbedder, write_files

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.embeddings import Embedder, NoneEmbedder
from mnemo.index import pending
from mnemo.index.api import ChunkRecord, IndexReader
from mnemo.index.file_rows import embedding_input
from mnemo.index.indexer import Indexer
from mnemo.index.writer_api import IndexWriter
from mnemo.markdown.chunker import chunk_markdown
from mnemo.search.filters import SearchFilters
from mnemo.text.terms import query_terms
from mnemo.workspace.layout import Workspace

Vectors = Literal["now", "later"]


@dataclass
class Built:
    """An indexed workspace on one engine: its writer and what hands out readers."""

    writer: IndexWriter
    reading: Callable[[], contextlib.AbstractContextManager[IndexReader | None]]


@contextlib.contextmanager
def duckdb_engine(
    request: pytest.FixtureRequest, root: Path, embedder: Embedder, vectors: Vectors
) -> Iterator[Built]:
    indexer = Indexer(Workspace(root, ignore=[".mnemo"]), embedder, IndexSettings(), ChunkingSettings())
    try:
        indexer.sync(vectors=vectors)
        assert indexer.store is not None
        yield Built(indexer.store, indexer.reading)
    finally:
        indexer.close()


@contextlib.contextmanager
def duckdb_point_reads(
    request: pytest.FixtureRequest, root: Path, embedder: Embedder, vectors: Vectors
) -> Iterator[Built]:
    """DuckDB as a large workspace reads it: rows and vectors by id through their rowids
    (:data:`mnemo.index.reader.POINT_READS_PAST`), up to 4 ids a read (more the plain way), none held
    in memory."""
    from mnemo.index import reader as reader_module
    from mnemo.index.record_cache import RecordCache
    from mnemo.index.vector_cache import VectorCache

    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setattr(reader_module, "POINT_READS_PAST", -1)
    monkeypatch.setattr(reader_module, "POINT_READS_AT_MOST", 4)
    monkeypatch.setattr(VectorCache, "get", lambda self, con, ids: None)
    monkeypatch.setattr(VectorCache, "nearest_across", lambda self, con, groups: None)
    monkeypatch.setattr(RecordCache, "wants_all", lambda self, chunks: False)
    with duckdb_engine(request, root, embedder, vectors) as built:
        yield built


Engine = Callable[[pytest.FixtureRequest, Path, Embedder, Vectors], contextlib.AbstractContextManager[Built]]
ENGINES: dict[str, Engine] = {"duckdb": duckdb_engine, "duckdb-point-reads": duckdb_point_reads}
"""Engine name -> a context manager that indexes ``root`` with ``embedder`` (vectors now or later)."""

NOTES: dict[str, str | bytes] = {
    "MEMORY.md": (
        "# Memory\n\n## Decisions\n- The billing service uses PostgreSQL with row-level security.\n\n"
        "## Preferences\n- Coffee: dark roast, no sugar.\n"
    ),
    "memory/2026-11-02.md": (
        "---\ntags: [billing, ops]\nproject: atlas\n---\n# 2026-11-02\n\n"
        "- Architecture review with Alice about the billing database.\n"
    ),
    "memory/2026-11-20.md": "# 2026-11-20\n\n- The lighthouse keeper counted zeppelins over the harbour.\n",
    "memory/gardening.md": "# Gardening\n\nTomatoes need full sun; prune the suckers weekly.\n",
    "memory/中文笔记.md": "# 数据库迁移\n\n我们决定把订单系统迁移到新的数据库集群，明年一月完成。\n",
    "memory/broken.md": "---\ntags: [unclosed\n# Broken\n\nFront matter that never closes.\n",
    "memory/binary.md": b"\x00\x01\x02 not markdown",
    "skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy\n---\n# Deploy\n\nRun make deploy.\n",
}


class Factory:
    """``make(files, dims=16, vectors="now")`` -> :class:`Built` on the engine under test."""

    def __init__(
        self, request: pytest.FixtureRequest, base: Path, engine: Engine, stack: contextlib.ExitStack
    ):
        self.request, self.base, self.engine, self.stack = request, base, engine, stack
        self.made = 0

    def __call__(
        self, files: dict[str, str | bytes] | None = None, *, dims: int = 16, vectors: Vectors = "now"
    ) -> Built:
        root = self.base / f"ws{self.made}"
        self.made += 1
        root.mkdir()
        write_files(root, NOTES if files is None else files)
        embedder: Embedder = HashEmbedder(dims=dims) if dims else NoneEmbedder()
        return self.stack.enter_context(self.engine(self.request, root, embedder, vectors))


@pytest.fixture(params=sorted(ENGINES))
def reader_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    with contextlib.ExitStack() as stack:
        yield Factory(request, tmp_path, ENGINES[request.param], stack)


@contextlib.contextmanager
def reading(built: Built) -> Iterator[IndexReader]:
    with built.reading() as reader:
        assert reader is not None, "an indexed workspace has a reader"
        yield reader


def _all_ids(reader: IndexReader) -> list[int]:
    return reader.allowed_ids(SearchFilters())


def _records(reader: IndexReader, *, with_vectors: bool = False) -> list[ChunkRecord]:
    return sorted(reader.records(_all_ids(reader), with_vectors=with_vectors).values(), key=lambda r: r.id)


def _by_path(reader: IndexReader, path: str) -> list[ChunkRecord]:
    return [r for r in _records(reader) if r.path == path]


# -- counts, problems, identity ---------------------------------------------------------------------------
def test_counts_name_files_chunks_and_vectors(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        counts = reader.counts()
        assert counts.files == len(NOTES) and counts.chunks == len(_all_ids(reader)) > len(NOTES) - 2
        assert (counts.embedded, counts.pending) == (counts.chunks, 0)
        assert reader.identity.dims == 16 and reader.identity.provider == "fake"


def test_counts_of_pending_vectors_and_of_a_keyword_index(reader_factory: Factory) -> None:
    with reading(reader_factory(vectors="later")) as reader:
        counts = reader.counts()
        assert counts.chunks > 0 and (counts.embedded, counts.pending) == (0, counts.chunks)
    with reading(reader_factory(dims=0)) as reader:
        counts = reader.counts()
        assert counts.chunks > 0 and (counts.embedded, counts.pending) == (0, 0)
        assert reader.identity.dims == 0


def test_counts_follow_committed_writes(reader_factory: Factory) -> None:
    built = reader_factory()
    with reading(built) as reader:
        before = reader.counts()
        assert reader.counts() == before, "asking twice changes nothing"
    with built.writer.transaction():
        built.writer.delete_file("memory/gardening.md")
    with reading(built) as reader:
        after = reader.counts()
        assert (after.files, after.chunks, after.embedded) == (
            before.files - 1,
            before.chunks - 1,
            before.embedded - 1,
        )
        assert _by_path(reader, "memory/gardening.md") == []


def test_file_problems_are_every_file_with_one_sorted_by_path(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        problems = reader.file_problems()
    assert [p.path for p in problems] == ["memory/binary.md", "memory/broken.md"]
    assert "front matter" in problems[1].problem and problems[0].problem


# -- chunk statistics ----------------------------------------------------------------------------------
def test_chunk_stats_count_retrievals_and_keep_the_latest(reader_factory: Factory) -> None:
    built = reader_factory()
    with reading(built) as reader:
        before = reader.chunk_stats("MEMORY.md")
    assert [c.start_line for c in before] == sorted(c.start_line for c in before) and len(before) >= 1
    assert all(c.times_retrieved == 0 and c.last is None and c.day is None for c in before)
    target = before[-1]
    row = (target.key, "MEMORY.md", target.start_line, target.end_line)
    with built.writer.transaction():
        built.writer.record_retrievals(
            [
                (*row, "coffee", datetime(2026, 11, 1, 9, 0), 0.5, 0.25, 1.0, 1.0, 0.4, 2),
                (*row, "dark roast", datetime(2026, 11, 3, 9, 0), None, 0.75, 0.9, 1.0, 0.6, 1),
            ]
        )
    with reading(built) as reader:
        after = {c.key: c for c in reader.chunk_stats("MEMORY.md")}
        daily = reader.chunk_stats("memory/2026-11-20.md")
    got = after[target.key]
    assert got.times_retrieved == 2 and got.last is not None
    assert (got.last.query, got.last.when, got.last.vector) == (
        "dark roast",
        datetime(2026, 11, 3, 9, 0),
        None,
    )
    assert (got.last.text, got.last.decay, got.last.score, got.last.rank) == (0.75, 0.9, 0.6, 1)
    assert all(c.times_retrieved == 0 for key, c in after.items() if key != target.key)
    assert daily and all(c.day == date(2026, 11, 20) for c in daily)


# -- rows and vectors by id ------------------------------------------------------------------------------
def test_records_have_named_fields_and_vectors_on_request(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        garden = _by_path(reader, "memory/gardening.md")
        assert len(garden) == 1
        record = garden[0]
        assert (record.source, record.kind, record.day, record.start_line) == ("memory", "evergreen", None, 1)
        assert record.heading == "Gardening" and "Tomatoes need full sun" in record.text
        assert record.embedding is None, "no vector unless asked for"
        missing = max(_all_ids(reader)) + 1000
        found = reader.records([record.id, missing], with_vectors=True)
        assert set(found) == {record.id}
        vector = found[record.id].embedding
        assert vector is not None and vector.shape == (16,) and vector.dtype == np.float32
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
        assert reader.records([]) == {}
        skill = _by_path(reader, "skills/deploy/SKILL.md")
        assert skill and skill[0].source == "skills"
        daily = _by_path(reader, "memory/2026-11-20.md")
        assert daily and daily[0].day == date(2026, 11, 20) and daily[0].kind == "daily"


def test_vectors_by_id_match_the_records_and_skip_pending_chunks(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        ids = _all_ids(reader)
        vectors = reader.vectors(ids)
        records = reader.records(ids, with_vectors=True)
        assert set(vectors) == set(ids)
        for cid, vector in vectors.items():
            embedding = records[cid].embedding
            assert embedding is not None and np.array_equal(vector, embedding)
    with reading(reader_factory(vectors="later")) as reader:
        ids = _all_ids(reader)
        assert ids and reader.vectors(ids) == {}
        assert all(r.embedding is None for r in reader.records(ids, with_vectors=True).values())


def test_vectors_follow_committed_writes(reader_factory: Factory) -> None:
    built = reader_factory(vectors="later")
    with reading(built) as reader:
        ids = _all_ids(reader)
        assert reader.vectors(ids) == {}
    step = pending.embed_step(lambda: built.writer, HashEmbedder(dims=16), limit=3)
    assert step is not None and step.filled == 3
    with reading(built) as reader:
        filled = reader.vectors(ids)
        assert len(filled) == 3 and reader.counts().embedded == 3
        gone = reader.records(list(filled))[min(filled)].path
    with built.writer.transaction():
        built.writer.delete_file(gone)
    with reading(built) as reader:
        left = reader.vectors(ids)
        assert left and set(left) < set(filled)
        assert all(r.path != gone for r in reader.records(list(left)).values())


def test_chunks_of_one_file_by_start_line_with_vectors_when_asked(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        plain = reader.chunks_of("memory/2026-11-02.md")
        assert plain and all(c.path == "memory/2026-11-02.md" and c.embedding is None for c in plain)
        assert [c.start_line for c in plain] == sorted(c.start_line for c in plain)
        embedded = reader.chunks_of("memory/2026-11-02.md", with_vectors=True)
        assert [c.id for c in embedded] == [c.id for c in plain]
        assert all(c.embedding is not None and len(c.embedding) == 16 for c in embedded)
        assert reader.chunks_of("memory/no-such-note.md", with_vectors=True) == []
    with reading(reader_factory(dims=0)) as reader:
        assert all(c.embedding is None for c in reader.chunks_of("MEMORY.md", with_vectors=True))


def test_embedded_chunks_of_a_source_in_path_order(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        chunks = reader.embedded_chunks("memory")
        assert chunks and all(c.source == "memory" and c.embedding is not None for c in chunks)
        assert [(c.path, c.start_line) for c in chunks] == sorted((c.path, c.start_line) for c in chunks)
        assert {c.path for c in chunks} >= {"MEMORY.md", "memory/gardening.md"}
        assert all(c.path != "skills/deploy/SKILL.md" for c in chunks)
    with reading(reader_factory(dims=0)) as reader:
        assert reader.embedded_chunks("memory") == []


def test_nearest_in_other_files_pairs_each_kept_chunk_with_its_most_similar_elsewhere(
    reader_factory: Factory,
) -> None:
    """The workspace near-duplicate pass: every kept chunk of a source against every other, its own
    file left out; checked against cosines worked out here from the chunks' vectors."""

    def keep(chunk: ChunkRecord) -> bool:
        return len(chunk.text.strip()) >= 40

    with reading(reader_factory()) as reader:
        pairs = reader.nearest_in_other_files("memory", keep)
        chunks = [c for c in reader.embedded_chunks("memory") if keep(c)]
        m = np.array([c.embedding for c in chunks], dtype=np.float64)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        sims = m @ m.T
        paths = np.array([c.path for c in chunks])
        sims[paths[:, None] == paths[None, :]] = -2.0
        row = {c.id: i for i, c in enumerate(chunks)}
        assert [a.id for a, _, _ in pairs] == [c.id for c in chunks], "every kept chunk, in path order"
        for a, b, cosine in pairs:
            assert a.path != b.path and keep(b) and b.source == "memory" and a.embedding is None
            assert cosine == pytest.approx(sims[row[a.id]].max(), abs=1e-5)
            assert cosine == pytest.approx(sims[row[a.id], row[b.id]], abs=1e-5)
        assert reader.nearest_in_other_files("memory", lambda c: c.path == "MEMORY.md") == []
    with reading(reader_factory(dims=0)) as reader:
        assert reader.nearest_in_other_files("memory", keep) == []


# -- nearest neighbours ----------------------------------------------------------------------------------
def _input_of(path: str, text: str) -> str:
    (chunk,) = chunk_markdown(path, text, target_tokens=ChunkingSettings().target_tokens, overlap=0)[:1]
    return embedding_input(chunk)


def test_nearest_finds_the_chunk_itself_first_and_honours_within(reader_factory: Factory) -> None:
    embedder = HashEmbedder(dims=16)
    path = "memory/2026-11-20.md"
    query = embedder.embed([_input_of(path, str(NOTES[path]))])[0]
    with reading(reader_factory()) as reader:
        target = _by_path(reader, path)[0].id
        hits = reader.nearest(query, 3)
        assert len(hits) == 3 and hits[0].chunk_id == target and hits[0].distance < 1e-5
        assert [h.distance for h in hits] == sorted(h.distance for h in hits)
        others = [i for i in _all_ids(reader) if i != target]
        within = reader.nearest(query, 50, within=others)
        assert within and {h.chunk_id for h in within} <= set(others) and len(within) <= len(others)
        exact = sorted(others, key=lambda i: -float(reader.vectors([i])[i] @ query))[: len(within)]
        assert [h.chunk_id for h in within][:2] == exact[:2]
        assert reader.nearest(query, 5, within=[]) == []
    with reading(reader_factory(vectors="later")) as reader:
        assert reader.nearest(query, 5) == [], "chunks without a vector are never neighbours"


# -- keywords --------------------------------------------------------------------------------------------
def test_keyword_top_ranks_by_bm25_with_limit_and_within(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        zeppelin = _by_path(reader, "memory/2026-11-20.md")[0].id
        hits = reader.keyword_top(query_terms("zeppelins"), 5)
        assert [h.chunk_id for h in hits] == [zeppelin] and hits[0].bm25 > 0
        assert hits[0].covered == pytest.approx(hits[0].total)
        billing = reader.keyword_top(query_terms("billing database"), 10)
        assert len(billing) >= 2 and [h.bm25 for h in billing] == sorted(
            (h.bm25 for h in billing), reverse=True
        )
        assert len({h.total for h in billing}) == 1, "the query's IDF mass is the same for every hit"
        assert reader.keyword_top(query_terms("billing database"), 1) == billing[:1]
        memory_ids = [r.id for r in _by_path(reader, "MEMORY.md")]
        inside = reader.keyword_top(query_terms("billing database"), 10, within=memory_ids)
        assert inside and {h.chunk_id for h in inside} <= set(memory_ids)
        assert reader.keyword_top(query_terms("xylophonequartz"), 5) == []
        assert reader.keyword_top([], 5) == []
        chinese = reader.keyword_top(query_terms("数据库集群"), 5)
        assert chinese and chinese[0].chunk_id == _by_path(reader, "memory/中文笔记.md")[0].id


def test_keyword_scores_score_exactly_the_ids_given(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        terms = query_terms("billing database")
        top = {h.chunk_id: h for h in reader.keyword_top(terms, 50)}
        garden = _by_path(reader, "memory/gardening.md")[0].id
        some = sorted(top)[:1]
        scored = reader.keyword_scores(terms, [*some, garden])
        assert [h.chunk_id for h in scored] == some, "a chunk without any query term is left out"
        assert scored[0].bm25 == pytest.approx(top[some[0]].bm25)
        assert reader.keyword_scores(terms, []) == []


# -- filters ---------------------------------------------------------------------------------------------
def test_allowed_ids_follow_kinds_tags_project_and_dates(reader_factory: Factory) -> None:
    with reading(reader_factory()) as reader:
        paths: Callable[[SearchFilters], set[str]] = lambda f: {  # noqa: E731
            r.path for r in reader.records(reader.allowed_ids(f)).values()
        }
        assert paths(SearchFilters(kinds=("memory",))) == {"MEMORY.md"}
        assert "MEMORY.md" not in paths(SearchFilters(kinds=("topic",)))
        assert paths(SearchFilters(kinds=("daily",))) == {"memory/2026-11-02.md", "memory/2026-11-20.md"}
        assert paths(SearchFilters(tags=("billing",))) == {"memory/2026-11-02.md"}
        assert paths(SearchFilters(tags=("billing", "nope"))) == set()
        assert paths(SearchFilters(project="ATLAS")) == {"memory/2026-11-02.md"}
        assert paths(SearchFilters(since=date(2026, 11, 10))) == {"memory/2026-11-20.md"}
        assert paths(SearchFilters(until=date(2026, 11, 10))) == {"memory/2026-11-02.md"}
        assert paths(SearchFilters(kinds=("skill",))) == {"skills/deploy/SKILL.md"}


# -- the DuckDB engine's reading context -------------------------------------------------------------------
def test_reading_with_a_timeout_answers_none_while_a_swap_holds_the_index(tmp_path: Path) -> None:
    write_files(tmp_path, {"MEMORY.md": "# Memory\n\n- one fact\n"})
    indexer = Indexer(
        Workspace(tmp_path, ignore=[".mnemo"]), HashEmbedder(), IndexSettings(), ChunkingSettings()
    )
    try:
        with indexer.reading() as none_yet:
            assert none_yet is None, "no index yet"
        indexer.sync()
        held, release = threading.Event(), threading.Event()

        def swap() -> None:
            with indexer.swap_lock:
                held.set()
                release.wait(5)

        thread = threading.Thread(target=swap, daemon=True)
        thread.start()
        assert held.wait(5)
        with indexer.reading(timeout=0.05) as reader:
            assert reader is None
        release.set()
        thread.join(5)
        with indexer.reading(timeout=0.05) as reader:
            assert reader is not None and reader.counts().files == 1
    finally:
        indexer.close()
