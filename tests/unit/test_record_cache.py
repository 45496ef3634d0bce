"""index/record_cache.py: a warm search reads its candidates' rows from memory, and never a row a
commit has changed since."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import WorkspaceBuilder

from mnemo.index.api import ChunkRecord
from mnemo.index.record_cache import RecordCache

NOTES = {
    "MEMORY.md": "# Memory\n\n- Billing runs on PostgreSQL 16.\n",
    "memory/garden.md": "# Garden\n\nTomatoes need full sun and deep watering.\n",
}
KEYWORD = '[embedding]\nprovider = "none"\n'


def _record(cid: int, text: str = "t") -> ChunkRecord:
    return ChunkRecord(cid, f"k{cid}", "memory/a.md", "memory", "evergreen", None, 1, 2, "", text)


def test_rows_read_before_a_commit_are_not_kept_after_it() -> None:
    cache = RecordCache()
    epoch = cache.epoch
    cache.clear()  # a commit between the read and the put
    cache.put([_record(1)], epoch)
    assert cache.get([1]) == ({}, [1])
    cache.put([_record(1)], cache.epoch)
    found, missing = cache.get([1, 2])
    assert list(found) == [1] and missing == [2]


def test_a_full_cache_starts_again() -> None:
    cache = RecordCache(limit=3)
    cache.put([_record(i) for i in range(3)], cache.epoch)
    cache.put([_record(9)], cache.epoch)
    assert cache.get([0, 9])[1] == [0]


def test_a_warm_search_reads_no_rows_and_an_edit_is_seen(
    make_workspace: WorkspaceBuilder, services_factory: Any
) -> None:
    root: Path = make_workspace(NOTES, toml=KEYWORD)
    memory = services_factory(root).memory
    memory.sync()
    assert "full sun" in memory.search("tomatoes watering").results[0].snippet
    store = memory.indexer.store
    queries: list[str] = []
    real = store.read_with

    def spying(con: Any) -> Any:
        reader = real(con)
        execute = reader.con.execute

        class Spy:
            def __getattr__(self, name: str) -> Any:
                return getattr(reader.con, name)

            def execute(self, sql: str, *args: Any) -> Any:
                queries.append(sql)
                return execute(sql, *args)

        reader.con = Spy()
        return reader

    store.read_with = spying
    assert "full sun" in memory.search("tomatoes watering").results[0].snippet
    assert queries == [], "the same query again: its term statistics are kept, nothing is read"
    assert "full sun" in memory.search("watering tomatoes sun").results[0].snippet
    assert queries and not any("FROM chunks WHERE id IN" in q for q in queries), queries
    (root / "memory/garden.md").write_text("# Garden\n\nTomatoes need shade cloth in July.\n")
    memory.sync()
    assert "shade cloth" in memory.search("tomatoes").results[0].snippet
    # lines added above a kept chunk move it: the row read from memory has the new lines
    before = memory.search("billing PostgreSQL").results[0]
    (root / "MEMORY.md").write_text("\n\n\n" + NOTES["MEMORY.md"])
    memory.sync()
    moved = memory.search("billing PostgreSQL").results[0]
    assert moved.path == "MEMORY.md" and moved.start_line == before.start_line + 3
    # a new note is found while every older row is in memory
    (root / "memory/bees.md").write_text("# Bees\n\nThe hive needs a water dish.\n")
    memory.sync()
    assert memory.search("hive water dish").results[0].path == "memory/bees.md"


def test_the_writer_lists_embedded_chunks_from_memory_as_the_table_does(
    make_workspace: WorkspaceBuilder, services_factory: Any, hash_embedder: Any
) -> None:
    import numpy as np

    from mnemo.index.reader import DuckReader
    from mnemo.memory.service import MemoryService
    from mnemo.services import build_services

    root: Path = make_workspace(NOTES)
    built = build_services(root)
    memory = MemoryService(built.workspace, built.settings, hash_embedder(dims=16))
    try:
        memory.sync(vectors="wait")
        store = memory.indexer.store
        cached = store.read_with(store.reader())
        plain = DuckReader(store.reader(), store.identity)  # no caches: everything from the table
        ours, table = cached.embedded_chunks("memory"), plain.embedded_chunks("memory")
        assert ours and ours == table  # ids, paths, lines, text (vectors compare apart)
        assert all(np.array_equal(a.embedding, b.embedding) for a, b in zip(ours, table, strict=True))
    finally:
        memory.close()
        built.close()


def test_the_writer_loads_every_row_page_by_page_whatever_the_gaps_in_ids(
    make_workspace: WorkspaceBuilder, hash_embedder: Any, monkeypatch: Any
) -> None:
    """The whole-index load reads ranges of ids (one statement held DuckDB's whole result and every
    row's tuple at once): deleted files leave gaps that must neither lose nor repeat a row."""
    from mnemo.index import reader as duck_reader
    from mnemo.index.reader import DuckReader
    from mnemo.memory.service import MemoryService
    from mnemo.services import build_services

    notes = {f"memory/note-{i:02d}.md": f"# Note {i}\n\nThe {i}th thing to remember.\n" for i in range(30)}
    root: Path = make_workspace(notes)
    built = build_services(root)
    memory = MemoryService(built.workspace, built.settings, hash_embedder(dims=16))
    try:
        memory.sync(vectors="wait")
        for i in range(0, 30, 4):
            (root / f"memory/note-{i:02d}.md").unlink()
        memory.sync(vectors="wait")
        monkeypatch.setattr(duck_reader, "RECORD_PAGE", 3)
        store = memory.indexer.store
        store.record_cache.clear()
        cached = store.read_with(store.reader())
        plain = DuckReader(store.reader(), store.identity)
        ids = [int(r[0]) for r in store.con.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
        assert len(ids) == 22 and ids[-1] - ids[0] + 1 > len(ids)  # gaps
        assert cached.records(ids[:1]) == plain.records(ids[:1])  # the first read loads every row
        found, missing = store.record_cache.get(ids)
        assert missing == [] and found == plain.records(ids)
    finally:
        memory.close()
        built.close()
