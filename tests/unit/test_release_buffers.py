"""DuckDB's buffer pool gives back the blocks the writer's caches already hold (mnemo.index.duck.release_buffers).

DuckDB keeps every block it read until its memory limit (80% of the machine's memory): a server that read
the whole chunk table to load its vectors and rows, or ran a checkpoint, kept ~20 MB of blocks at 2,000
notes that no search reads again. The writer evicts them when its caches hold every row and vector, once
a workspace diagnostics pass has loaded them (before the pass's own work), after it, and after the quiet
checkpoint; searches and writes go on as before, the memory limit is left as it was, and rows waiting for
a checkpoint are never spilled to disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from tests.conftest import HashEmbedder

from mnemo.config import load_settings
from mnemo.editor.service import EditorService
from mnemo.index import duck
from mnemo.index.duck import memory_limit
from mnemo.index.reader import DuckReader
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def _small_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """This workspace's blocks are a few MB: the 4 MB left to DuckDB beyond its rows would be most of them.
    (Not much less: DuckDB's own count of its memory is up to ~2 MB off, and a limit under what it can
    evict from the file's blocks would make it write waiting rows to a temporary file.)"""
    monkeypatch.setattr(duck, "RELEASE_MARGIN", 1 << 20)


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
        assert held < before and held <= duck.RELEASE_MARGIN / 2**20 and spilled == 0, (held, before)
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


def test_rows_waiting_for_a_checkpoint_stay_in_memory_while_the_files_blocks_go(tmp_path: Path) -> None:
    """DuckDB evicts the file's blocks before its managed buffers (those would be written to a temporary
    file): a release with rows waiting for a checkpoint (a server's start that indexed what changed while
    it was away, an edit) drops the blocks and keeps the rows in memory."""
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
        assert memory.release_buffers()
        held, still_waiting, spilled = _cached_mb(memory)
        assert held < before / 2 and still_waiting == waiting and spilled == 0, (held, before, still_waiting)
        assert memory.search("quokkas kites").results[0].path == "memory/new.md"
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


def _set_back(limit: str, now: str) -> None:
    """The limit is set back as DuckDB showed it; read back, it shows rounded down (to 0.1 of its unit)."""
    (number, unit), (was, was_unit) = now.split(), limit.split()
    assert unit == was_unit and float(was) - 0.11 <= float(number) <= float(was), (now, limit)


def _table_with_waiting_rows(path: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB file whose table was read whole (its blocks held) and then changed (rows waiting)."""
    con = duck.connect(path, vss=False)
    con.execute("CREATE TABLE c (id BIGINT, txt VARCHAR, e FLOAT[64])")
    con.execute(
        "INSERT INTO c SELECT i, repeat('word ', 40) || i, "
        "list_transform(range(64), x -> (i * x % 97)::FLOAT)::FLOAT[64] FROM range(20000) t(i)"
    )
    con.execute("CHECKPOINT")
    con.execute("SELECT sum(length(txt)), sum(e[3]) FROM c").fetchall()
    con.execute("DELETE FROM c WHERE id % 100 = 0")
    con.execute("INSERT INTO c SELECT id + 100000, txt, e FROM c WHERE id < 500")
    return con


def test_a_lean_checkpoint_writes_every_waiting_row_and_sets_the_limit_back(tmp_path: Path) -> None:
    path = tmp_path / "index.duckdb"
    con = _table_with_waiting_rows(path)
    limit = memory_limit(con)
    con.execute("SET threads = 3")
    duck.lean_checkpoint(con, limit)
    _set_back(limit, memory_limit(con))
    assert con.execute("SELECT current_setting('threads')").fetchone() == (3,), "threads set back"
    rows = con.execute(
        "SELECT tag, memory_usage_bytes, temporary_storage_bytes FROM duckdb_memory()"
    ).fetchall()
    assert {tag: used for tag, used, _ in rows}.get("IN_MEMORY_TABLE", 0) == 0
    assert sum(spilled for *_, spilled in rows) == 0
    con.close()
    assert (
        not path.with_name(path.name + ".wal").exists()
        or path.with_name(path.name + ".wal").stat().st_size == 0
    )
    again = duckdb.connect(str(path), read_only=True)
    try:
        assert again.execute("SELECT count(*), count(*) FILTER (WHERE id >= 100000) FROM c").fetchone() == (
            20000 - 200 + 495,
            495,
        )
    finally:
        again.close()


class _OutOfMemoryOnce:
    """A connection whose first CHECKPOINT runs out of memory (as under too low a limit)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.statements, self.failed = con, [], False

    def execute(self, sql: str, *args: object) -> duckdb.DuckDBPyConnection:
        self.statements.append(sql)
        if sql == "CHECKPOINT" and not self.failed:
            self.failed = True
            raise duckdb.OutOfMemoryException("could not allocate block")
        return self.con.execute(sql, *args)


def test_a_checkpoint_the_lower_limit_cannot_hold_runs_again_under_the_usual_one(tmp_path: Path) -> None:
    path = tmp_path / "index.duckdb"
    con = _table_with_waiting_rows(path)
    limit = memory_limit(con)
    (threads,) = con.execute("SELECT current_setting('threads')").fetchone() or (0,)
    proxy = _OutOfMemoryOnce(con)
    duck.lean_checkpoint(proxy, limit)  # type: ignore[arg-type]
    ran = [sql for sql in proxy.statements if not sql.startswith("SELECT")]
    assert (
        ran[0] == "SET threads = 1"
        and ran[1].startswith("SET memory_limit")
        and ran[2:]
        == [
            "CHECKPOINT",
            f"SET memory_limit = '{limit}'",
            "CHECKPOINT",
            f"SET threads = {threads}",
        ]
    )
    _set_back(limit, memory_limit(con))
    rows = con.execute("SELECT tag, memory_usage_bytes FROM duckdb_memory()").fetchall()
    assert dict(rows).get("IN_MEMORY_TABLE", 0) == 0
    con.close()


def test_the_first_pass_loads_the_caches_holding_few_blocks_before_comparing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _built(tmp_path / "ws")
    try:
        store = memory.indexer.store
        assert store is not None and not store.vector_cache.holds_all
        seen: list[tuple[bool, float]] = []
        compare = DuckReader.nearest_in_other_files

        def compared(self: DuckReader, *args: Any) -> Any:
            with memory._write_lock:
                blocks = _cached_mb(memory)[0]
            seen.append((store.vector_cache.holds_all and store.record_cache.complete, blocks))
            return compare(self, *args)

        monkeypatch.setattr(DuckReader, "nearest_in_other_files", compared)
        EditorService(memory, memory.settings).diagnose_workspace()
        assert len(seen) == 1 and seen[0][0], seen  # loaded before the pass's own work
        assert seen[0][1] <= duck.RELEASE_MARGIN / 2**20, seen  # and DuckDB let go of their blocks
    finally:
        memory.close()
