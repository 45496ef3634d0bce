"""Writing a namespace of the PostgreSQL index: the incremental sync, one file, a full build.

A *build* (no live generation yet, ``--full``, or another model or chunker when ``replace`` allows)
runs under the namespace's build lock (a session advisory lock: one build at a time, whichever
machine), fills a new generation many files per transaction, and swaps it in; a build killed midway
leaves an unfinished generation that the next build deletes. A machine that waited for another's
build finds a live generation of its model afterwards and only syncs its own changes into it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import psycopg

from mnemo.errors import SearchCancelled
from mnemo.index import pending, pg_schema, racy
from mnemo.index.file_rows import Progress, SyncReport
from mnemo.index.pg_store import FileWrite, PgStore
from mnemo.index.pg_sync import PreparedFile, StatCache, prepare
from mnemo.index.sources import SourceText
from mnemo.workspace.layout import MemoryFile

if TYPE_CHECKING:
    from mnemo.index.pg_indexer import PgIndexer

log = logging.getLogger(__name__)

BUILD_LOCK = 0x6D6E6275  # advisory lock class: one build per namespace at a time
BUILD_BATCH_FILES = 256
SAVE_EVERY_FILES = 500
"""The stat cache is saved this often during a sync (a killed sync then re-reads less)."""


def _file_write(prepared: PreparedFile, mtime: float, size: int, vectors: dict[str, np.ndarray]) -> FileWrite:
    mf = prepared.memory_file
    return FileWrite(
        path=mf.path,
        kind=mf.kind.value,
        source=mf.source,
        day=mf.day.isoformat() if mf.day else None,
        digest=prepared.source.digest,
        mtime=mtime,
        size=size,
        problem=prepared.problem,
        meta=prepared.meta,
        rows=prepared.rows,
        vectors=vectors,
    )


def _known_vectors(
    store: PgStore,
    prepared: list[PreparedFile],
    report: SyncReport,
    embed: Callable[[str], np.ndarray] | None,
) -> dict[str, np.ndarray]:
    """Vectors by chunk key from the embedding cache (and from ``embed`` for the rest, when given)."""
    if store.identity.dims == 0:
        return {}
    keys = [row.key for p in prepared for row in p.rows]
    found = pending.vectors_for(store, [text for p in prepared for text in p.inputs], embed)
    report.chunks_embedded += found.embedded
    report.chunks_reused += found.cached
    return {key: found.matrix[i] for i, key in enumerate(keys) if not found.pending[i]}


def _prepare(
    indexer: PgIndexer, memory_file: MemoryFile, source: SourceText, report: SyncReport
) -> PreparedFile:
    prepared = prepare(memory_file, source, indexer.chunking.target_tokens, indexer.chunking.overlap)
    if prepared.problem:
        report.problems.append((memory_file.path, prepared.problem))
        log.warning("%s: %s", memory_file.path, prepared.problem)
    return prepared


def write_file(
    indexer: PgIndexer,
    memory_file: MemoryFile,
    source: SourceText,
    mtime: float,
    size: int,
    report: SyncReport,
    *,
    embed: bool,
) -> None:
    """Make ``source`` the committed state of one file (its new chunks embedded now when ``embed``)."""
    store = indexer.store
    assert store is not None
    prepared = _prepare(indexer, memory_file, source, report)

    def one(text: str) -> np.ndarray:
        vector: np.ndarray = indexer.embedder.embed([text])[0]
        return vector

    vectors = _known_vectors(store, [prepared], report, one if embed else None)
    outcome = store.replace_file(_file_write(prepared, mtime, size, vectors))
    if outcome.written:
        report.files_indexed += 1
        report.chunks_reused += outcome.kept


def sync_files(
    indexer: PgIndexer, report: SyncReport, progress: Progress | None, cancel: threading.Event | None
) -> None:
    """Write the files that changed on this disk (see :mod:`mnemo.index.pg_sync`)."""
    store = indexer.store
    assert store is not None
    cache = StatCache(indexer.stat_cache_path, store.g)
    committed = store.file_states()
    on_disk = list(indexer.workspace.scan())
    report.files_seen = len(on_disk)
    present: set[str] = set()
    for done, (memory_file, stat) in enumerate(on_disk):
        indexer.check_cancel(cancel)
        rel = memory_file.path
        present.add(rel)
        if rel in committed and cache.unchanged(rel, stat) and rel not in indexer.buffered:
            continue
        indexer.buffered.discard(rel)
        if progress:
            progress(done, len(on_disk), rel)
        read_at = time.time()
        source = indexer.read_source(memory_file)
        mtime = racy.recorded_mtime(stat.st_mtime, read_at)  # a write within its tick must not go unseen
        state = committed.get(rel)
        if state is None or state.digest != source.digest or source.text is None:
            write_file(indexer, memory_file, source, mtime, stat.st_size, report, embed=False)
        cache.saw(rel, mtime, stat.st_size, source.digest)
        if done % SAVE_EVERY_FILES == SAVE_EVERY_FILES - 1:
            cache.save()
    for gone in sorted(set(cache.files) - present):
        state = committed.get(gone)
        if state is not None and state.digest == cache.files[gone].digest:  # still the version seen here
            with store.transaction():
                store.delete_file(gone)
            report.files_removed += 1
        cache.forget(gone)
    cache.save()
    if progress:
        progress(len(on_disk), len(on_disk), "")


def _build_lock(con: psycopg.Connection, namespace: str, cancel: threading.Event | None) -> None:
    """Wait for the namespace's build lock (polling, so a cancel is noticed)."""
    while True:
        row = con.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", [BUILD_LOCK, namespace]).fetchone()
        if row and row[0]:
            return
        if cancel is not None and cancel.is_set():
            raise SearchCancelled("indexing cancelled")
        time.sleep(0.2)


def build(
    indexer: PgIndexer,
    con: psycopg.Connection,
    report: SyncReport,
    progress: Progress | None,
    cancel: threading.Event | None,
    *,
    replace_live: bool,
) -> pg_schema.Generation:
    """Fill a new generation from this disk and make it live; returns it. Without ``replace_live``, a
    live generation of this identity that appeared while waiting for the lock is synced into instead."""
    namespace, identity = indexer.namespace, indexer.identity()
    _build_lock(con, namespace, cancel)
    try:
        live = pg_schema.live_generation(con, namespace)
        if live is not None and not replace_live:  # another machine built it while this one waited
            indexer.store = PgStore(con, live)
            if indexer.foreign:
                report.files_stale = StatCache(indexer.stat_cache_path, live.id).count_changed(
                    indexer.workspace, indexer.settings.max_file_bytes
                )
            else:
                sync_files(indexer, report, progress, cancel)
            return live
        with con.transaction():
            pg_schema.namespace_lock(con, namespace)
            for stale in pg_schema.stale_generations(con, namespace):
                pg_schema.drop_generation(con, stale)
            made = pg_schema.create_generation(
                con, namespace, identity.provider, identity.model, identity.dims, identity.chunker, live=False
            )
        _fill(indexer, PgStore(con, made), report, progress, cancel)
        with con.transaction():
            pg_schema.namespace_lock(con, namespace)
            pg_schema.swap_generation(con, namespace, made.id)
        _analyze(con)
        report.rebuilt = True
        return made
    finally:
        con.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [BUILD_LOCK, namespace])


def _analyze(con: psycopg.Connection) -> None:
    """After a bulk load: planner statistics, and the visibility map that lets a query's postings be
    read by index-only scans (:func:`keep_visible`); autovacuum would get there later.
    A role that does not own the tables only gets a warning from PostgreSQL and skips it."""
    for table in ("chunks", "postings", "terms"):
        try:
            con.execute(f"VACUUM (ANALYZE) {pg_schema.SCHEMA}.{table}")
        except psycopg.errors.InsufficientPrivilege:
            return


VISIBLE_SHARE = 0.9
"""Under this share of the postings' pages marked all-visible, a sync vacuums them (:func:`keep_visible`)."""


def keep_visible(con: psycopg.Connection) -> bool:
    """Vacuum the postings when the last vacuum left under :data:`VISIBLE_SHARE` of their pages marked
    all-visible; True when it did.

    An index-only scan visits the heap for every posting on a page not marked: at 10,000 notes a common
    word's list took 23 ms to read instead of 7 (docs/benchmarks.md, team memory). VACUUM cannot mark
    the pages of rows that a snapshot older than their writes might not see (autovacuum's own ANALYZE
    of a table growing under a build, a long reader elsewhere), nor, under ``synchronous_commit = off``,
    of rows whose commit is not yet flushed (for a fraction of a second). Nothing marks them afterwards
    until autovacuum comes back, which inserts trigger only at a fifth of the table. The check reads
    the catalog only; a role that does not own the table never vacuums."""
    row = con.execute(
        "SELECT relpages, relallvisible, pg_has_role(relowner, 'MEMBER') FROM pg_class WHERE oid = %s::regclass",
        [f"{pg_schema.SCHEMA}.postings"],
    ).fetchone()
    if row is None or not row[2] or row[0] <= 0 or row[1] >= VISIBLE_SHARE * row[0]:
        return False
    # the heap's unmarked pages only: no pass over the indexes (gigabytes at 100,000 notes) for dead
    # rows, which autovacuum removes in its own time
    con.execute(f"VACUUM (SKIP_LOCKED, INDEX_CLEANUP OFF) {pg_schema.SCHEMA}.postings")
    return True


def _fill(
    indexer: PgIndexer,
    store: PgStore,
    report: SyncReport,
    progress: Progress | None,
    cancel: threading.Event | None,
) -> None:
    """Every file on this disk into ``store``'s (not yet live) generation, BUILD_BATCH_FILES a transaction."""
    cache = StatCache(indexer.stat_cache_path, store.g)
    on_disk = list(indexer.workspace.scan())
    report.files_seen = len(on_disk)
    batch: list[tuple[PreparedFile, float, int]] = []

    def flush() -> None:
        prepared = [p for p, _, _ in batch]
        vectors = _known_vectors(store, prepared, report, None)
        store.write_batch([_file_write(p, mtime, size, vectors) for p, mtime, size in batch])
        report.files_indexed += len(batch)
        batch.clear()

    for done, (memory_file, stat) in enumerate(on_disk):
        indexer.check_cancel(cancel)
        if progress:
            progress(done, len(on_disk), memory_file.path)
        read_at = time.time()
        source = indexer.read_source(memory_file)
        mtime = racy.recorded_mtime(stat.st_mtime, read_at)
        batch.append((_prepare(indexer, memory_file, source, report), mtime, stat.st_size))
        cache.saw(memory_file.path, mtime, stat.st_size, source.digest)
        if len(batch) >= BUILD_BATCH_FILES:
            flush()
    if batch:
        flush()
    cache.save()
    if progress:
        progress(len(on_disk), len(on_disk), "building search indexes")
