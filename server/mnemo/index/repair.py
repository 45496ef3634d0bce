"""Crash damage of an index file: detection on open, and the rows read back without the vss extension.

DuckDB persists the vss HNSW index as one blob written at each checkpoint; the rows written after it
live in the write-ahead log (``index.duckdb.wal``). When a process is killed, the next open replays the
log into the table and, on the table's first use, into the deserialised HNSW index, which then often
fails with ``Failed to add to the HNSW index: Duplicate keys`` (an internal error: DuckDB invalidates the
whole database instance). A checkpoint of such a state can leave an index that fails on every use.

The rows themselves are intact. Opened *without* vss, the HNSW index stays unbound (never loaded) and
every table reads normally, the log replayed. So the repair is: read the tables that way (read-only:
the damaged file is not touched), write them into a new file, build fresh fts and HNSW indexes and swap
it in (``ChunkStore.salvage``). Rows are deduplicated on the way; a file whose chunk rows do not add
up is marked stale so that the next sync re-reads it from its Markdown.

Symptoms checked on every open (cheap counts): duplicate chunk ids or file rows (salvage), a missing
HNSW index (created in place), fts tables out of step with the chunks (rebuilt in place).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo.index import fts
from mnemo.index.batches import arrow_view
from mnemo.index.duck import connect
from mnemo.index.duckdb_native import duckdb, is_lock_error
from mnemo.index.feedback import (
    restore as restore_feedback,  # (no global named like a table: DuckDB would scan it)
)
from mnemo.index.pending import HNSW_INDEX, create_vector_index, vector_index_wanted

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

BROKEN_DATABASE = (duckdb.InternalException, duckdb.FatalException)
"""Errors after which DuckDB refuses every further statement on that database instance."""

TABLES = ("files", "chunks", "embedding_cache", "retrievals", "feedback")
"""What a salvage carries into the new file (meta is rewritten; fts tables are rebuilt)."""


def wal_path(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def unclean(path: Path) -> bool:
    """A write-ahead log next to a closed index: the last process did not close it (killed, crashed).

    Only one process can open an index file for writing, and ``ChunkStore.close`` checkpoints, which
    empties and removes the log; so a log found before opening means a crash."""
    return wal_path(path).exists()


@dataclass
class SavedRows:
    """The tables of an index file, read without loading its HNSW index."""

    meta: dict[str, str]
    tables: dict[str, pa.Table] = field(default_factory=dict)


def read_rows(path: Path) -> SavedRows | None:
    """Every table of ``path`` that exists (its write-ahead log replayed in memory, the file left as it
    is), or None when even that fails. Raises ``duckdb.IOException`` when another process holds the file."""
    try:
        con = connect(path, read_only=True, vss=False)
    except duckdb.Error as exc:
        if is_lock_error(exc):
            raise
        log.warning("index %s cannot be read for repair: %s", path, exc)
        return None
    try:
        saved = SavedRows(dict(con.execute("SELECT key, value FROM meta").fetchall()))
        for table in TABLES:
            try:
                saved.tables[table] = con.execute(f"SELECT * FROM {table}").to_arrow_table()
            except duckdb.CatalogException:  # an older schema without it
                continue
        return saved
    except duckdb.Error as exc:
        log.warning("index %s: rows unreadable (%s)", path, exc)
        return None
    finally:
        con.close()


def load_rows(con: duckdb.DuckDBPyConnection, saved: SavedRows) -> dict[str, int]:
    """Insert salvaged rows into a freshly created index (same schema), deduplicated; returns counts
    of what was dropped or marked stale. The caller builds the fts and HNSW indexes afterwards."""
    for table, insert in (
        ("files", "SELECT * FROM saved QUALIFY row_number() OVER (PARTITION BY path) = 1"),
        (
            "chunks",
            "SELECT * FROM saved WHERE path IN (SELECT path FROM files) "
            "QUALIFY row_number() OVER (PARTITION BY id) = 1",
        ),
        (
            "embedding_cache",
            "SELECT * FROM saved QUALIFY row_number() OVER (PARTITION BY provider, model, hash) = 1",
        ),
        ("retrievals", "SELECT * FROM saved"),
    ):
        with arrow_view(con, "saved", saved.tables[table]):
            con.execute(f"INSERT INTO {table} {insert}")
    restore_feedback(con, saved.tables.get("feedback"))  # absent from an index that had none
    # A file whose chunk rows do not add up is re-read from its Markdown by the next sync.
    stale = con.execute(
        "UPDATE files SET hash = '', mtime = -2, chunks = n.count FROM ("
        "  SELECT f.path, count(c.id) AS count FROM files f LEFT JOIN chunks c ON c.path = f.path "
        "  GROUP BY f.path"
        ") n WHERE files.path = n.path AND files.chunks <> n.count"
    ).fetchone()
    (next_id,) = con.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone() or (1,)
    con.execute("DROP SEQUENCE chunk_ids")
    con.execute(f"CREATE SEQUENCE chunk_ids START {int(next_id)}")
    kept = con.execute("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM chunks)").fetchone()
    return {
        "files dropped": len(saved.tables["files"]) - int(kept[0] if kept else 0),
        "chunks dropped": len(saved.tables["chunks"]) - int(kept[1] if kept else 0),
        "files stale": int(stale[0]) if stale else 0,
    }


def symptoms(con: duckdb.DuckDBPyConnection, dims: int) -> list[str]:
    """Damage visible without loading the HNSW index (a few counts over the tables)."""
    found: list[str] = []
    row = con.execute(
        "SELECT (SELECT count(*) - count(DISTINCT id) FROM chunks), "
        "(SELECT count(*) - count(DISTINCT path) FROM files), "
        f"(SELECT count(*) FROM {fts.SCHEMA}.docs) - (SELECT count(*) FROM chunks), "
        f"(SELECT count(*) FROM duckdb_indexes() WHERE index_name = '{HNSW_INDEX}')"
    ).fetchone()
    dup_ids, dup_files, fts_gap, hnsw = row if row else (0, 0, 0, 1)
    if dup_ids:
        found.append(f"duplicate chunk ids ({dup_ids})")
    if dup_files:
        found.append(f"duplicate file rows ({dup_files})")
    if fts_gap:
        found.append("keyword tables out of step with the chunks")
    # (pending vectors: built when the last is in; few vectors: searched in memory, no index wanted).
    # Pending last: `embedding IS NULL` reads the whole vector column into DuckDB's buffers (~11 MB at
    # 2,000 notes, at every open), which only an index that wants an HNSW index needs to know.
    if dims > 0 and not hnsw and vector_index_wanted(con, dims, has_index=False) and not _pending(con):
        found.append("missing HNSW index")
    return found


def _pending(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute(
        "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE embedding IS NULL LIMIT 1)"
    ).fetchone()
    return bool(row and row[0])


def needs_salvage(found: list[str]) -> bool:
    """Duplicated rows need a rewrite; the other symptoms are repaired in place."""
    return any(s.startswith("duplicate") for s in found)


def repair_in_place(con: duckdb.DuckDBPyConnection, found: list[str]) -> None:
    """Rebuild the fts tables and/or create the HNSW index from the stored vectors."""
    if any(s.startswith("keyword tables") for s in found):
        fts.rebuild(con)
    if "missing HNSW index" in found:
        create_vector_index(con)
    con.execute("CHECKPOINT")
