"""Crash damage of the index is repaired without losing rows; a DuckDB internal error never ends the process.

The damage is produced for real: a writer process (tests/crash_writer.py) applying editor edits to an
index with an HNSW index is SIGKILLed; opening that file as mnemo did before (vss loaded, log replayed
into the HNSW index) fails with DuckDB's "Failed to add to the HNSW index: Duplicate keys".
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest
from tests.crash_writer import embedder, kill, make_workspace, old_open_fails, spawn_writer, word

from mnemo.config import load_settings
from mnemo.errors import IndexUnavailable
from mnemo.index import repair
from mnemo.index.duck import connect
from mnemo.index.indexer import INDEX_FILE
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace


@pytest.fixture(autouse=True)
def _hnsw_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about HNSW damage: the index keeps one at any size (as a large workspace does)."""
    from mnemo.index import pending as pending_module

    monkeypatch.setattr(pending_module, "EXACT_SEARCH_BYTES", 0)


def _service(root: Path, embedder) -> MemoryService:  # type: ignore[no-untyped-def]
    settings, problems = load_settings(root)
    ws = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
    return MemoryService(ws, settings, embedder, problems)


def _rows(path: Path) -> set[tuple[object, ...]]:
    """Every chunk row of an index file, read without its HNSW index (the ground truth)."""
    saved = repair.read_rows(path)
    assert saved is not None
    table = saved.tables["chunks"].select(["id", "key", "path", "text", "start_line"])
    return set(zip(*(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True))


@pytest.fixture
def killed_writer(tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A workspace whose index writer was SIGKILLed after 40 committed buffer edits."""
    root = tmp_path / "ws"
    make_workspace(root)
    first = _service(root, embedder())
    first.sync()
    first.close()
    proc = spawn_writer(root, "edits")
    try:
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "commit 40" or time.monotonic() > deadline:
                break
    finally:
        kill(proc)
    index = root / ".mnemo" / INDEX_FILE
    assert repair.unclean(index), "the writer was killed without leaving its log"
    return root


def test_killed_writer_damage_is_real_and_repaired_on_open(  # type: ignore[no-untyped-def]
    killed_writer: Path, consistent
) -> None:
    index = killed_writer / ".mnemo" / INDEX_FILE
    assert old_open_fails(index, killed_writer.parent / "scratch"), "the kill left no HNSW damage"
    before = _rows(index)
    memory = _service(killed_writer, embedder())
    try:
        memory.ensure_open()
        store = memory.indexer.store
        assert store is not None and not repair.unclean(index)
        after = set(store.con.execute("SELECT id, key, path, text, start_line FROM chunks").fetchall())
        assert after == before  # every committed row is kept, none duplicated
        consistent(store.con)
        outcome = memory.search(word("marker", 7))
        assert outcome.mode == "hybrid" and outcome.results[0].path == "memory/note-07.md"
        # The editor's unsaved edits are in the index; a sync goes back to the disk text.
        assert (
            store.con.execute("SELECT count(*) FROM chunks WHERE text LIKE '%edited text%'").fetchone()[0] > 0
        )
        memory.sync()
        consistent(memory.indexer.store.con)
    finally:
        memory.close()
    assert not old_open_fails(index, killed_writer.parent / "scratch")


def test_internal_error_from_real_damage_is_survived(  # type: ignore[no-untyped-def]
    killed_writer: Path, consistent, monkeypatch
) -> None:
    """As in the gateway: the damaged file is open and a search raises DuckDB's internal error."""
    index = killed_writer / ".mnemo" / INDEX_FILE
    before = _rows(index)
    monkeypatch.setattr(repair, "unclean", lambda path: False)  # open it as mnemo did before
    memory = _service(killed_writer, embedder())
    try:
        memory.ensure_open()
        damaged = memory.indexer.store
        outcome = memory.search(word("marker", 7))  # fails inside on the HNSW index, repaired, answered
        assert outcome.results[0].path == "memory/note-07.md"
        assert memory.recovery.count == 1 and memory.indexer.store is not damaged
        rows = set(
            memory.indexer.store.con.execute("SELECT id, key, path, text, start_line FROM chunks").fetchall()
        )
        assert rows == before
        consistent(memory.indexer.store.con)
        assert memory.status().chunks == len(before)
    finally:
        memory.close()


def _built(make, hash_embedder, sample_notes) -> tuple[Path, dict[str, int]]:  # type: ignore[no-untyped-def]
    root = make(sample_notes)
    memory = _service(root, hash_embedder())
    memory.sync()
    status = memory.status()
    memory.close()
    return root, {"files": status.files, "chunks": status.chunks}


@pytest.mark.parametrize("damage", ["missing hnsw", "duplicate rows", "fts out of step"])
def test_detected_symptoms_are_repaired(  # type: ignore[no-untyped-def]
    make_workspace, hash_embedder, sample_notes, consistent, damage: str
) -> None:
    root, counts = _built(make_workspace, hash_embedder, sample_notes)
    index = root / ".mnemo" / INDEX_FILE
    con = connect(index)
    if damage == "missing hnsw":
        con.execute("DROP INDEX chunks_hnsw")
    elif damage == "duplicate rows":
        con.execute("INSERT INTO chunks SELECT * FROM chunks WHERE path = 'MEMORY.md'")
        con.execute("INSERT INTO files SELECT * FROM files WHERE path = 'MEMORY.md'")
    else:
        con.execute("DELETE FROM fts_main_chunks.docs WHERE name IN (SELECT id FROM chunks LIMIT 2)")
    assert repair.symptoms(con, 16)
    con.execute("CHECKPOINT")
    con.close()

    memory = _service(root, hash_embedder())
    try:
        memory.ensure_open()
        store = memory.indexer.store
        assert store is not None
        assert repair.symptoms(store.con, 16) == []
        assert consistent(store.con) == counts
        outcome = memory.search("PostgreSQL")
        assert outcome.mode == "hybrid" and outcome.results[0].path == "MEMORY.md"
        assert not memory.sync().rebuilt  # repaired, not rebuilt: nothing re-embedded
    finally:
        memory.close()


@pytest.mark.parametrize("error", [duckdb.InternalException, duckdb.FatalException])
def test_injected_internal_error_is_answered_and_repaired(  # type: ignore[no-untyped-def]
    sample_workspace: Path, hash_embedder, consistent, monkeypatch, error
) -> None:
    memory = _service(sample_workspace, hash_embedder())
    try:
        memory.sync()
        real = memory.searcher.search
        calls = {"n": 0}

        def failing_once(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            if calls["n"] == 1:
                raise error("Failed to add to the HNSW index: Duplicate keys not allowed")
            return real(*args, **kwargs)

        monkeypatch.setattr(memory.searcher, "search", failing_once)
        first = memory.indexer.store
        assert memory.search("PostgreSQL").results[0].path == "MEMORY.md"  # retried after the repair
        assert memory.indexer.store is not first and memory.recovery.count == 1
        consistent(memory.indexer.store.con)

        def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
            raise error("still broken")

        monkeypatch.setattr(memory.searcher, "search", failing)
        with pytest.raises(IndexUnavailable, match=r"internal DuckDB error .*mnemo index --full"):
            memory.search("PostgreSQL")
        monkeypatch.setattr(memory.searcher, "search", real)
        assert memory.search("PostgreSQL").results[0].path == "MEMORY.md"
        assert memory.status().state == "ready"
    finally:
        memory.close()
