"""What the writer's ``files`` and ``file_meta`` tables say of each file, kept between its writes, and
the statement that gives files whose content did not change their new stamps (:func:`touch`).

Every sync compares them with the disk: an editor's server at each save, a daemon at each search from
the command line (a file may have changed on disk since). Read from DuckDB at every sync, they cost
~8 ms at 2,000 notes, next to the ~12 ms of the stat of every file. Kept here, they are read again
only after one of their rows is written. The writer owns its index file alone, so nothing else changes
the tables: the store calls :meth:`KnownFiles.changing` before each write of a ``files`` or
``file_meta`` row, and :meth:`KnownFiles.transaction_ended` when a transaction commits or rolls back
(what was read inside it may be uncommitted). Other writes (vectors, caches, statistics) keep them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mnemo.index import file_meta
from mnemo.index.batches import batch_view
from mnemo.index.duckdb_native import duckdb
from mnemo.index.writer_api import FileState


class KnownFiles:
    """The indexed files' states and the paths with a ``file_meta`` row, each read on first use and again
    after one of their rows is written. What is returned must not be changed (it is kept)."""

    def __init__(self) -> None:
        self._states: dict[str, FileState] | None = None
        self._with_meta: frozenset[str] | None = None
        self._written = False
        """A row was written since the current transaction began (or outside any)."""

    def states(self, con: duckdb.DuckDBPyConnection) -> Mapping[str, FileState]:
        """Each indexed file's digest, mtime and size, by path."""
        if self._states is None:
            rows = con.execute("SELECT path, hash, mtime, size FROM files").fetchall()
            self._states = {path: FileState(digest, mtime, size) for path, digest, mtime, size in rows}
        return self._states

    def with_meta(self, con: duckdb.DuckDBPyConnection) -> frozenset[str]:
        """The paths that have a ``file_meta`` row."""
        if self._with_meta is None:
            self._with_meta = file_meta.known(con)
        return self._with_meta

    def changing(self) -> None:
        """A ``files`` or ``file_meta`` row is about to be written: read them again, and again once the
        transaction ends."""
        self._states = None
        self._with_meta = None
        self._written = True

    def transaction_ended(self) -> None:
        """A transaction committed or rolled back: what was read after a write in it is dropped."""
        if self._written:
            self._written = False
            self._states = None
            self._with_meta = None


def touch(con: duckdb.DuckDBPyConnection, stamps: Sequence[tuple[str, float, int]]) -> None:
    """New mtimes and sizes of files whose content is unchanged, ``(path, mtime, size)``: one statement."""
    if stamps:
        # As a relation, not list parameters: DuckDB converts those element by element (2,000 stamps,
        # a checkout's: 0.94 s against 27 ms; a live index's write, so not through Arrow: mnemo.index.batches).
        paths, mtimes, sizes = (list(column) for column in zip(*stamps, strict=True))
        columns = {"path": ("VARCHAR", paths), "mtime": ("DOUBLE", mtimes), "size": ("BIGINT", sizes)}
        with batch_view(con, "touched_files", columns):
            con.execute(
                "UPDATE files SET mtime = t.mtime, size = t.size FROM touched_files t WHERE files.path = t.path"
            )
