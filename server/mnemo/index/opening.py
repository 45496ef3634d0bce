"""Opening an existing index file: its identity, crash damage repaired first, rows never lost.

A log next to the file (the last process was killed) or duplicated rows mean a *salvage*: the rows are
read without the vss extension, written into a new generation with fresh fts and HNSW indexes, and
swapped in (:mod:`mnemo.index.repair` explains why). A missing HNSW index or fts tables out of step are
repaired in place. Only a file whose rows cannot be read at all is left for a rebuild from the Markdown.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

from mnemo.errors import IndexUnavailable
from mnemo.index import pending, repair
from mnemo.index.build_file import replace_file
from mnemo.index.duck import connect, read_closed
from mnemo.index.duckdb_native import duckdb, is_lock_error
from mnemo.index.identity import identity_from
from mnemo.index.store import ChunkStore, IndexIdentity

log = logging.getLogger(__name__)


def connect_identity(path: Path) -> tuple[duckdb.DuckDBPyConnection, IndexIdentity] | None:
    """An open connection to an existing index and its identity, crash damage repaired; None (closed)
    when missing, unreadable, incomplete or of another schema. Raises ``duckdb.IOException`` when
    another process holds the file."""
    if not path.exists():
        return None
    if repair.unclean(path):  # killed while writing: never replay its log into the HNSW index
        _try_salvage(path, "the last process using it did not close it")
    for attempt in range(2):
        try:
            return _connect_checked(path)
        except (duckdb.Error, OSError) as exc:
            if is_lock_error(exc):
                raise
            if _cannot_write(exc):  # not damage: nothing to repair or rebuild there
                reason = str(exc).splitlines()[0]
                raise IndexUnavailable(f"the index {path} cannot be opened for writing ({reason})") from exc
            if attempt == 0 and _try_salvage(path, str(exc).splitlines()[0]):
                continue
            log.warning("index %s cannot be opened (%s); it will be rebuilt", path, exc)
    return None


def _cannot_write(exc: BaseException) -> bool:
    """A read-only file system or a folder without write permission (DuckDB says so in its message)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    text = str(exc)
    return isinstance(exc, duckdb.IOException) and (
        "Read-only file system" in text or "Permission denied" in text
    )


def _connect_checked(path: Path) -> tuple[duckdb.DuckDBPyConnection, IndexIdentity] | None:
    """Open ``path``, read its identity, repair in place what can be; raises on damage that needs a
    salvage (duplicated rows)."""
    con = connect(path, vss=_has_vectors(path))
    try:
        identity = identity_from(dict(con.execute("SELECT key, value FROM meta").fetchall()))
        if identity is None:
            con.close()
            return None
        found = repair.symptoms(con, identity.dims)
        if repair.needs_salvage(found):
            raise duckdb.InternalException("; ".join(found))
        if found:
            log.warning("index %s: %s; repairing", path, "; ".join(found))
            repair.repair_in_place(con, found)
        pending.settle_vector_index(con, identity.dims)  # (an older index of few vectors: dropped)
    except BaseException:
        con.close()
        raise
    return con, identity


def _has_vectors(path: Path) -> bool:
    """Whether the index at ``path`` holds vectors, so its HNSW index needs the vss extension loaded
    (0.13 s of CPU a process otherwise: a keyword-only index has no HNSW index). Read from its ``meta``
    without any extension; True when that cannot be told (the caller opens as before)."""
    row = read_closed(path, lambda con: con.execute("SELECT value FROM meta WHERE key = 'dims'").fetchone())
    return row is None or str(row[0]) != "0"


def salvage(path: Path, reason: str) -> bool:
    """Rewrite the index at ``path`` from its own rows into a new generation and swap it in. False
    when its rows cannot be read (or it is incomplete, or of another schema): a rebuild is due then.
    Raises ``duckdb.IOException`` when another process holds the file."""
    saved = repair.read_rows(path)
    identity = identity_from(saved.meta) if saved is not None else None
    if saved is None or identity is None:
        return False
    log.warning("index %s: %s; rewriting it from its rows", path, reason)
    store = ChunkStore.create(path.with_name(path.name + ".repairing"), identity)
    try:
        dropped = repair.load_rows(store.con, saved)
        store.finish_indexes()
    finally:
        store.con.close()
    replace_file(store.path, path)
    log.warning("index %s repaired (%s)", path, ", ".join(f"{k} {v}" for k, v in dropped.items()))
    return True


def _try_salvage(path: Path, reason: str) -> bool:
    try:
        return salvage(path, reason)
    except (duckdb.Error, OSError) as exc:
        if is_lock_error(exc):
            raise
        log.warning("index %s could not be repaired: %s", path, exc)
        return False


def peek_identity(path: Path) -> IndexIdentity | None:
    """The identity recorded in an index file, read-only and without the vector extension: nothing is
    repaired, replayed or written, so it is safe before the index is opened for real. None when
    missing, unreadable, incomplete, of another schema, or held by another process."""
    if not path.exists():
        return None
    try:
        con = connect(path, read_only=True, vss=False)
    except (duckdb.Error, OSError):
        return None
    try:
        return identity_from(dict(con.execute("SELECT key, value FROM meta").fetchall()))
    except duckdb.Error:
        return None
    finally:
        con.close()


def read_identity(path: Path) -> IndexIdentity | None:
    """The identity stored in an existing index, or None when missing, corrupt or of another schema."""
    found = connect_identity(path)
    if found is None:
        return None
    found[0].close()
    return found[1]


def open_existing(path: Path) -> ChunkStore | None:
    """The existing index whatever it was built with (one connection); None when there is none usable.
    The caller compares ``identity`` with what it wants: reads never rebuild."""
    found = connect_identity(path)
    return None if found is None else ChunkStore(path, *found)
