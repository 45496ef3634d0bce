"""A read-only snapshot of an index file, for a process that only reads it once (``mnemo search``).

It opens the file read-only, without the vss extension (~0.12 s of CPU to load; a vector query is
then an exact scan, which at one query costs less than loading the HNSW index would) and without
the in-memory BM25 postings (keyword queries are scored in SQL over the fts tables: building the
postings costs more than one query). Nothing is repaired, replayed into an HNSW index or written:
a file that needs any of that (a log left by a killed writer, another schema) is not opened here,
and the caller takes the writer's path instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from mnemo.errors import IndexBusy
from mnemo.index.api import IndexIdentity
from mnemo.index.duck import connect
from mnemo.index.duckdb_native import duckdb, is_lock_error
from mnemo.index.identity import identity_from
from mnemo.index.reader import DuckReader


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


class Snapshot:
    """One read-only connection to a complete index file; :meth:`close` when done."""

    def __init__(self, con: duckdb.DuckDBPyConnection, identity: IndexIdentity) -> None:
        self.con = con
        self.identity = identity

    @classmethod
    def open(cls, path: Path) -> Snapshot | None:
        """The index at ``path`` read-only; None when it is missing, incomplete, of another schema,
        unreadable, or left with a log by a writer that did not close it (the writer's path repairs
        that). Raises IndexBusy while another process writes it."""
        if not path.exists() or _wal(path).exists():
            return None
        try:
            # No extension: the HNSW index is never used here, queries are stemmed in Python; one
            # thread: a one-shot's queries are small, and a second thread costs more CPU than it saves.
            con = connect(path, read_only=True, vss=False, threads=1)
        except duckdb.IOException as exc:
            if is_lock_error(exc):
                raise IndexBusy(
                    f"the index {path} is in use by another mnemo process (`mnemo index`?); try again"
                ) from exc
            return None
        except (duckdb.Error, OSError):
            return None
        try:
            identity = identity_from(dict(con.execute("SELECT key, value FROM meta").fetchall()))
        except duckdb.Error:
            identity = None
        if identity is None:
            con.close()
            return None
        return cls(con, identity)

    def file_stamps(self) -> dict[str, tuple[float, int]]:
        """What the index recorded of each file on disk, by path: (mtime, size), as
        :meth:`mnemo.workspace.layout.Workspace.stamps` reads them (a changed one must be read again)."""
        rows = self.con.execute("SELECT path, mtime, size FROM files").fetchall()
        return {path: (mtime, size) for path, mtime, size in rows}

    def file_digests(self, paths: Iterable[str]) -> dict[str, str]:
        """The content digest the index holds for each of ``paths`` it has."""
        # All rows, filtered here: a list parameter costs DuckDB ~0.1 ms an element (2,000 paths: 0.25 s),
        # the whole table at 2,000 files ~1 ms.
        wanted = set(paths)
        return {
            path: digest
            for path, digest in self.con.execute("SELECT path, hash FROM files").fetchall()
            if path in wanted
        }

    def reader(self) -> DuckReader:
        """The read API on this snapshot; keyword scores come from SQL (no postings are loaded)."""
        return DuckReader(self.con, self.identity, None)

    def close(self) -> None:
        self.con.close()
