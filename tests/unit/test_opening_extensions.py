"""index/opening.py: the writer loads the vss extension only for an index that holds vectors (a keyword-only
index has no HNSW index; loading vss costs ~0.13 s of CPU a process), and the fts extension only for an
edit (mnemo makes, fills and scores its tables itself; a build stems in Python: ~40 ms a process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import WorkspaceBuilder

from mnemo.index.opening import connect_identity

NOTES = {"MEMORY.md": "# Memory\n\n- Billing runs on PostgreSQL 16.\n"}


def _loaded(path: Path) -> set[str]:
    found = connect_identity(path)
    assert found is not None
    con, _ = found
    try:
        rows = con.execute("SELECT extension_name FROM duckdb_extensions() WHERE loaded").fetchall()
        return {row[0] for row in rows}
    finally:
        con.close()


def test_vss_is_loaded_only_for_an_index_with_vectors(
    make_workspace: WorkspaceBuilder, services_factory: Any, hash_embedder: Any
) -> None:
    from mnemo.memory.service import MemoryService

    keyword = make_workspace(NOTES, toml='[embedding]\nprovider = "none"\n')
    services = services_factory(keyword)
    services.memory.sync()
    path = services.memory.indexer.path
    services.memory.close()
    assert "vss" not in _loaded(path) and "fts" not in _loaded(path)

    hybrid = make_workspace(NOTES)
    built = services_factory(hybrid)
    memory = MemoryService(built.workspace, built.settings, hash_embedder(dims=16))
    memory.sync(vectors="wait")
    path = memory.indexer.path
    memory.close()
    assert "vss" in _loaded(path) and "fts" not in _loaded(path)


def test_a_writer_hands_freed_memory_back_and_a_reader_starts_no_allocator_thread(tmp_path: Path) -> None:
    """A long-lived writer (a server) sets DuckDB's allocator background threads: without, what a
    query's hash tables used stays resident (~30 MB after the postings load at 2,000 notes)."""
    from mnemo.index.duck import connect

    path = tmp_path / "x.duckdb"
    writer = connect(path, vss=False)
    setting = "SELECT current_setting('allocator_background_threads')"
    assert writer.execute(setting).fetchone() == (True,)
    writer.close()
    reader = connect(path, read_only=True, vss=False)
    try:
        assert reader.execute(setting).fetchone() == (False,)
    finally:
        reader.close()
