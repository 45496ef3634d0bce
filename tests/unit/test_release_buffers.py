"""DuckDB's buffer pool gives back the blocks the writer's caches already hold (mnemo.index.duck.release_buffers).

DuckDB keeps every block it read until its memory limit (80% of the machine's memory): a server that read
the whole chunk table to load its vectors and rows, or ran a checkpoint, kept ~20 MB of blocks at 2,000
notes that no search reads again. The writer evicts them when its caches hold every row and vector, after
a workspace diagnostics pass and after the quiet checkpoint; searches and writes go on as before, the
memory limit is left as it was, and rows waiting for a checkpoint are never spilled to disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import HashEmbedder

from mnemo.config import load_settings
from mnemo.editor.service import EditorService
from mnemo.index import duck
from mnemo.index.duck import memory_limit
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _small_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """This workspace's blocks are a few MB: the 4 MB left to DuckDB beyond its rows would be most of them."""
    monkeypatch.setattr(duck, "RELEASE_MARGIN", 256 * 1024)


def _service(root: Path) -> MemoryService:
    settings, problems = load_settings(root)
    return MemoryService(
        Workspace(root, ignore=[settings.index.dir]), settings, HashEmbedder(dims=384), problems
    )


def _cached_mb(memory: MemoryService) -> tuple[float, float, float]:
    """(the file's blocks held, rows held for a checkpoint, bytes spilled) by the writer's DuckDB, MB."""
    store = memory.indexer.store
    assert store is not None
    rows = store.con.execute(
        "SELECT tag, memory_usage_bytes, temporary_storage_bytes FROM duckdb_memory()"
    ).fetchall()
    held = {tag: used / 2**20 for tag, used, _ in rows}
    return held.get("BASE_TABLE", 0.0), held.get("IN_MEMORY_TABLE", 0.0), sum(t for *_, t in rows) / 2**20


def _workspace(root: Path) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- We deploy staging from the release branch.\n", "utf-8")
    for n in range(600):
        body = "\n\n".join(
            f"## Part {p}\n\n" + f"note {n} part {p} about topic{n % 17} " * 12 for p in range(3)
        )
        (root / "memory" / f"note-{n:03d}.md").write_text(f"# Note {n}\n\n{body}\n", encoding="utf-8")


def _built(root: Path) -> MemoryService:
    """A service over an indexed workspace, checkpointed (the vectors filled after the keyword side
    wait for one)."""
    _workspace(root)
    memory = _service(root)
    memory.sync()
    memory.indexer.checkpoint()
    return memory


def test_a_workspace_pass_leaves_duckdb_no_second_copy_of_what_the_caches_hold(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    memory = _built(root)
    try:
        store = memory.indexer.store
        assert store is not None
        limit = memory_limit(store.con)
        with memory.indexer.reading() as reader:  # what a search reads, read the plain way: DuckDB holds it
            assert reader is not None
            reader.con.execute("SELECT id, text, terms, embedding FROM chunks").fetchall()
        before = _cached_mb(memory)[0]
        assert before > 1.0
        editor = EditorService(memory, memory.settings)
        editor.diagnose_workspace()  # loads the caches, then releases DuckDB's blocks
        held, _, spilled = _cached_mb(memory)
        assert held < before / 2 and spilled == 0, (held, before)
        # Set back as DuckDB showed it (to 0.1 of its unit), the same after every release: no drift.
        after = memory_limit(store.con)
        (number, unit), (was, was_unit) = after.split(), limit.split()
        assert unit == was_unit and float(was) - 0.11 <= float(number) <= float(was)
        memory.release_buffers()
        assert memory_limit(store.con) == after
        assert memory.search("topic3 part 1").results  # reads what it needs again
        (root / "memory" / "new.md").write_text("# New\n\nkites and quokkas in the hills\n", "utf-8")
        memory.sync()
        assert memory.search("quokkas kites").results[0].path == "memory/new.md"
    finally:
        memory.close()


def test_rows_waiting_for_a_checkpoint_stay_in_memory_and_the_checkpoint_releases_the_rest(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    memory = _built(root)
    try:
        editor = EditorService(memory, memory.settings)
        editor.diagnose_workspace()
        (root / "memory" / "new.md").write_text("# New\n\nkites and quokkas in the hills\n", "utf-8")
        memory.sync()  # rows DuckDB holds until a checkpoint
        store = memory.indexer.store
        assert store is not None
        store.con.execute("SELECT id, text, terms, embedding FROM chunks").fetchall()
        before, waiting, _ = _cached_mb(memory)
        assert waiting > 0
        memory.release_buffers()  # nothing: DuckDB could spill the waiting rows to disk
        assert _cached_mb(memory) == (before, waiting, 0.0)
        memory.indexer.checkpoint()
        held, waiting, spilled = _cached_mb(memory)
        assert held < before / 2 and waiting == 0 and spilled == 0, (held, before, waiting)
        assert memory.search("quokkas kites").results[0].path == "memory/new.md"
    finally:
        memory.close()


def test_nothing_is_released_while_the_caches_do_not_hold_every_row(tmp_path: Path) -> None:
    memory = _built(tmp_path / "ws")
    try:
        store = memory.indexer.store
        assert store is not None
        with memory.indexer.reading() as reader:
            assert reader is not None
            reader.con.execute("SELECT id, text, embedding FROM chunks").fetchall()
        before = _cached_mb(memory)[0]
        assert not store.record_cache.complete
        memory.release_buffers()
        assert _cached_mb(memory)[0] == before
    finally:
        memory.close()
