"""Racily clean files: a note written again within its mtime's tick, with the same size, after an index
read it. Its stat does not change; the index skipped it and kept the old text for good ("Postgres 15"
found, "Postgres 16" never). Each test replays that second write by putting the first write's mtime back
(`os.utime(ns=...)`), as a file system with a coarse clock does by itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import record_classified

from mnemo.config import load_settings
from mnemo.index import racy
from mnemo.memory.readonly import ReadOnlyMemory
from mnemo.memory.service import MemoryService
from mnemo.workspace.layout import Workspace

OLD = "# Stack\n\nThe billing database runs Postgres 15 on the blue cluster.\n"
NEW = "# Stack\n\nThe billing database runs Postgres 16 on the teal cluster.\n"
NOTE = "memory/stack.md"


def _service(root: Path, embedder: Any) -> MemoryService:
    settings, problems = load_settings(root)
    return MemoryService(
        Workspace(root, ignore=[*settings.index.ignore, settings.index.dir]), settings, embedder, problems
    )


def _rewrite_in_the_same_tick(path: Path, text: str) -> None:
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _paths(outcome: Any) -> list[str]:
    return [hit.path for hit in outcome.results]


def test_a_same_size_write_in_the_same_tick_is_seen_by_the_next_sync(make_workspace, hash_embedder) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({NOTE: OLD})
    memory = _service(root, hash_embedder())
    memory.sync()
    _rewrite_in_the_same_tick(root / NOTE, NEW)
    assert memory.sync().files_indexed == 1
    assert _paths(memory.search("teal cluster", min_score=0.0)) == [NOTE]
    texts = memory.indexer.store.con.execute("SELECT text FROM chunks WHERE path = ?", [NOTE]).fetchall()
    assert "Postgres 16" in str(texts) and "Postgres 15" not in str(texts)
    memory.close()


def test_a_settled_file_is_recorded_with_its_mtime_and_not_read_again(make_workspace, hash_embedder) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({NOTE: OLD})
    memory = _service(root, hash_embedder())
    memory.sync()
    reads = record_classified(memory.indexer.workspace)  # (a file is classified when it is read)
    assert memory.sync().files_indexed == 0 and reads == [NOTE]  # unsettled: its content compared again
    old = (root / NOTE).stat().st_mtime - 60  # as the same file would be a minute later
    os.utime(root / NOTE, (old, old))
    reads.clear()
    assert memory.sync().files_indexed == 0 and reads == [NOTE]
    assert memory.indexer.store.file_states()[NOTE].mtime == old  # settled: its real mtime recorded
    reads.clear()
    assert memory.sync().files_indexed == 0 and reads == []  # and a stat is enough from then on
    memory.close()


def test_a_one_shot_search_compares_an_unsettled_file_itself(make_workspace, hash_embedder) -> None:  # type: ignore[no-untyped-def]
    from mnemo.memory.readonly import WriterNeeded

    root = make_workspace({NOTE: OLD, "memory/other.md": "# Other\n\nNothing about databases here.\n"})
    writer = _service(root, hash_embedder())
    writer.sync()
    writer.close()
    settings, _ = load_settings(root)
    alone = ReadOnlyMemory(Workspace(root), settings, lambda _: hash_embedder())
    assert _paths(alone.search("blue cluster", min_score=0.0))[0] == NOTE  # unchanged: answered read-only
    _rewrite_in_the_same_tick(root / NOTE, NEW)
    try:
        alone.search("teal cluster", min_score=0.0)
    except WriterNeeded as needed:
        assert "changed" in str(needed)
    else:
        raise AssertionError("a one-shot search answered from the old text of a rewritten note")


def test_the_command_line_finds_the_second_write(make_workspace) -> None:  # type: ignore[no-untyped-def]
    root = make_workspace({NOTE: OLD}, toml='[embedding]\nprovider = "none"\n')

    def mnemo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mnemo", *args, "-w", str(root)],
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert mnemo("index").returncode == 0
    _rewrite_in_the_same_tick(root / NOTE, NEW)
    found = mnemo("search", "teal cluster")
    assert found.returncode == 0 and NOTE in found.stdout, found.stdout + found.stderr
    assert "Postgres 16" in mnemo("get", NOTE).stdout
    assert "Postgres 15" not in mnemo("search", "billing database").stdout


def test_recorded_mtime() -> None:
    assert racy.recorded_mtime(100.0, 100.001) == racy.UNSETTLED
    assert racy.recorded_mtime(100.0, 101.9) == racy.UNSETTLED
    assert racy.recorded_mtime(100.0, 102.0) == 100.0
    assert racy.recorded_mtime(200.0, 100.0) == racy.UNSETTLED  # a clock behind the file's: not trusted


def test_stale_paths_compares_only_unsettled_files_of_the_same_size(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(b"alpha")
    (tmp_path / "b.md").write_bytes(b"bravo")
    (tmp_path / "c.md").write_bytes(b"charl")
    import hashlib

    digest = {
        name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in ("a.md", "b.md", "c.md")
    }
    asked: list[str] = []

    def digests(paths):  # type: ignore[no-untyped-def]
        asked.extend(paths)
        return {p: digest[p] if p != "b.md" else "another" for p in paths}

    recorded = {
        "a.md": (racy.UNSETTLED, 5),
        "b.md": (racy.UNSETTLED, 5),
        "c.md": (1.0, 5),
        "gone.md": (1.0, 3),
    }
    on_disk = {"a.md": (9.0, 5), "b.md": (9.0, 5), "c.md": (2.0, 5), "new.md": (9.0, 1)}
    assert racy.stale_paths(recorded, on_disk, digests, tmp_path, 1_000) == {
        "b.md",
        "c.md",
        "gone.md",
        "new.md",
    }
    assert sorted(asked) == ["a.md", "b.md"]  # c.md's mtime differs: changed without reading it


def test_mnemo_index_records_unsettled_files_once_they_settle(make_workspace, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A one-shot `mnemo index` with nothing changed opens nothing for writing; files indexed within
    their tick would then be hashed by every one-shot search for good. Once they have settled it takes
    the writer's path and records their mtimes (two seconds are played by RACY_SECONDS = 0)."""
    from mnemo.cli.main import main
    from mnemo.index.duck import connect

    root = make_workspace(
        {NOTE: OLD, "memory/other.md": "# Other\n\nNothing here.\n"}, toml='[embedding]\nprovider = "none"\n'
    )
    index = root / ".mnemo" / "index.duckdb"

    def mtimes() -> set[float]:
        con = connect(index, read_only=True)
        try:
            return {row[0] for row in con.execute("SELECT mtime FROM files").fetchall()}
        finally:
            con.close()

    assert main(["index", "-w", str(root)]) == 0
    assert mtimes() == {racy.UNSETTLED}
    assert main(["index", "-w", str(root)]) == 0 and mtimes() == {racy.UNSETTLED}  # not settled yet
    monkeypatch.setattr(racy, "RACY_SECONDS", 0.0)
    assert main(["index", "-w", str(root)]) == 0
    assert mtimes() == {(root / NOTE).stat().st_mtime, (root / "memory/other.md").stat().st_mtime}
    capsys.readouterr()
