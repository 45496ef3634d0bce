"""What building a new index file takes (:class:`mnemo.index.store.ChunkStore`): its tables, the files
staged for the build's next statement, and the rename of the finished file over the old one."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo.errors import IndexBusy, IndexUnavailable
from mnemo.flock_wait import take_exclusive
from mnemo.index import file_meta, repair
from mnemo.index.batches import Columns
from mnemo.index.writer_api import ChunkRow, FileMeta

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

BUILD_LOCK = "build.lock"
BUILD_WAIT_S = 600.0
"""How long a process waits for another one's build or repair of the same index before giving up."""

BUILD_BATCH_FILES = 256
"""A full build writes this many files per statement (a new index file: nothing reads it yet)."""

FILE_COLUMNS = [
    *((name, "VARCHAR") for name in ("path", "kind", "source")),
    ("day", "DATE"),
    ("hash", "VARCHAR"),
    ("mtime", "DOUBLE"),
    ("size", "BIGINT"),
    ("chunks", "INTEGER"),
    ("problem", "VARCHAR"),
]
"""The ``files`` table's columns, in its order."""


CHUNK_COLUMNS = [
    *((name, "VARCHAR") for name in ("key", "path", "source", "kind")),
    ("day", "DATE"),
    ("start_line", "INTEGER"),
    ("end_line", "INTEGER"),
    *((name, "VARCHAR") for name in ("heading", "text", "terms", "hash")),
]
"""The ``chunks`` table's columns between ``id`` and the vector, in its order: fields of :class:`ChunkRow`."""


def chunk_columns(ids: Sequence[int], rows: Sequence[ChunkRow]) -> Columns:
    """New chunks' rows as the ``chunks`` table's columns (without the vector)."""
    values = ((name, (sql_type, list(map(attrgetter(name), rows)))) for name, sql_type in CHUNK_COLUMNS)
    return {"id": ("BIGINT", list(ids)), **dict(values)}


def schema(dims: int) -> list[str]:
    """The statements that create an index's tables (``dims`` 0: no vector column)."""
    vector = f", embedding FLOAT[{dims}]" if dims > 0 else ""
    return [
        "CREATE TABLE IF NOT EXISTS meta(key VARCHAR, value VARCHAR)",
        "CREATE TABLE IF NOT EXISTS files(path VARCHAR, kind VARCHAR, source VARCHAR, day DATE, "
        "hash VARCHAR, mtime DOUBLE, size BIGINT, chunks INTEGER, problem VARCHAR)",
        "CREATE SEQUENCE IF NOT EXISTS chunk_ids START 1",
        "CREATE TABLE IF NOT EXISTS chunks(id BIGINT, key VARCHAR, path VARCHAR, source VARCHAR, "
        "kind VARCHAR, day DATE, start_line INTEGER, end_line INTEGER, heading VARCHAR, text VARCHAR, "
        f"terms VARCHAR, hash VARCHAR{vector})",
        "CREATE TABLE IF NOT EXISTS embedding_cache(provider VARCHAR, model VARCHAR, hash VARCHAR, "
        "embedding FLOAT[])",
        "CREATE TABLE IF NOT EXISTS retrievals(chunk_key VARCHAR, path VARCHAR, start_line INTEGER, "
        "end_line INTEGER, query VARCHAR, searched_at TIMESTAMP, vector DOUBLE, text DOUBLE, decay DOUBLE, "
        "weight DOUBLE, score DOUBLE, rank INTEGER)",
        file_meta.DDL,
    ]


@dataclass
class StagedFiles:
    """Files a full build has read and not written yet: their chunks, vectors, ``files`` and
    ``file_meta`` rows (:meth:`mnemo.index.store.ChunkStore.stage_file`)."""

    rows: list[ChunkRow] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    pending: list[bool] = field(default_factory=list)
    """Per row with a vector array: written without a vector (:mod:`mnemo.index.pending`)."""
    files: list[tuple[object, ...]] = field(default_factory=list)
    metas: list[tuple[str, FileMeta]] = field(default_factory=list)

    def add(
        self,
        rows: Sequence[ChunkRow],
        vectors: np.ndarray | None,
        file_row: tuple[object, ...],
        pending: Sequence[bool],
        meta: FileMeta | None,
    ) -> int:
        """Stage one file; how many are staged now."""
        self.rows.extend(rows)
        if vectors is not None and len(rows):
            self.vectors.append(vectors)
            self.pending.extend(pending or [False] * len(rows))
        self.files.append(file_row)
        self.metas.append((str(file_row[0]), meta or FileMeta()))
        return len(self.files)


def replace_file(built: Path, final_path: Path) -> None:
    """Rename a closed, checkpointed index file over ``final_path``. The old file's log goes first:
    DuckDB replays a log onto whatever file it finds it next to. Killed in between, the old file is
    left at its last checkpoint (consistent; the next sync re-reads the files changed since)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(repair.wal_path(final_path))
    try:
        os.replace(built, final_path)
    except OSError as exc:  # a folder where the index goes, a read-only file system: said, not a traceback
        with contextlib.suppress(OSError):
            os.unlink(built)
        raise IndexUnavailable(
            f"cannot put the index in place at {final_path} ({exc.strerror or exc})"
        ) from exc


@contextlib.contextmanager
def build_lock(folder: Path, wait_s: float = BUILD_WAIT_S) -> Iterator[None]:
    """One process at a time builds, repairs or first opens the index in ``folder`` (an ``flock`` on
    its ``build.lock``). Two at once wrote the same ``.building`` and ``.repairing`` files, unlinked
    each other's, and one ended in a traceback. IndexBusy after ``wait_s``; a folder where no lock
    file can be made (a read-only workspace) is not locked: nothing can be built there either."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / BUILD_LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        log.debug("no build lock in %s: %s", folder, exc)
        yield
        return
    try:
        if not take_exclusive(fd, wait_s):
            raise IndexBusy(
                f"another mnemo process has been building the index in {folder} for over {wait_s:g} s; "
                "try again when it is done"
            )
        yield
    finally:
        os.close(fd)  # (releases the lock)
