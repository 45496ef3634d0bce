"""Indexer: keeps the DuckDB index in step with the workspace, re-embedding only changed chunks.

One Indexer is the single writer of an index. A full build (no index yet, an unreadable one, another
schema; another model or chunker only when asked with ``replace``) goes into ``index.duckdb.building``
and is swapped in when complete, so readers never see a half-built generation and a process killed
mid-build leaves the old index intact. One process at a time builds, repairs or first opens it (the
folder's ``build.lock``: :func:`mnemo.index.build_file.build_lock`); one that waited opens what the
other built. Incremental updates commit one file, or one batch of changed files, per transaction: a
crash leaves every file either old or new (the pass itself: :mod:`mnemo.index.disk_sync`).

**Reads never rebuild.** An index built with another provider, model or chunker is opened as it is
(*foreign*): it is searched keyword-only when its vectors are of another model, it is not written to,
and :meth:`Indexer.mismatch_note` says which command rebuilds it. What replaces it (``replace``):

- ``"any"``: whatever it was built with (``mnemo index``; also ``full=True``);
- ``"chunker"`` (default: the editor's server, the gateway): only another chunker with the same model
  (after an upgrade or a [chunking] change: its vectors stay in the embedding cache);
- ``"none"``: nothing (``mnemo search``, a read).

A rebuild carries the embedding cache of every model seen, so switching back costs nothing.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.embeddings import Embedder
from mnemo.errors import IndexBusy, IndexUnavailable
from mnemo.index import opening, pending, racy, repair
from mnemo.index.build_file import build_lock
from mnemo.index.disk_sync import DiskSync, count_stale
from mnemo.index.duckdb_native import duckdb, is_lock_error
from mnemo.index.file_rows import Progress, Replace, SyncReport, VectorsWhen, embedding_input, write_file
from mnemo.index.identity import INDEX_FILE
from mnemo.index.matching import IdentityMatch
from mnemo.index.reader import DuckReader
from mnemo.index.sources import SourceText, decode_memory_bytes
from mnemo.index.store import ChunkStore
from mnemo.markdown.chunker import Chunk
from mnemo.workspace.layout import MemoryFile, Workspace

log = logging.getLogger(__name__)


class Indexer(IdentityMatch):
    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        index_settings: IndexSettings,
        chunking: ChunkingSettings,
    ) -> None:
        self.workspace = workspace
        self.embedder = embedder
        self.settings = index_settings
        self.chunking = chunking
        self.dir = workspace.root / index_settings.dir
        self.path = self.dir / INDEX_FILE
        self.store: ChunkStore | None = None
        self.swap_lock = threading.RLock()
        """Held by readers while they use a cursor and by the writer while it swaps generations."""
        self.opened = threading.Event()
        """Set once a usable index is open (readers at start-up wait for it, not for the sync)."""

    # -- identity and opening -----------------------------------------------------------------
    def open(self) -> bool:
        """Open the existing index, whatever it was built with (see :attr:`foreign`), repairing crash
        damage first. False means there is none usable and a full build is needed."""
        with build_lock(self.dir):  # (not beside another process's build or repair of it)
            return self._open_unlocked()

    def _open_unlocked(self) -> bool:
        try:
            store = opening.open_existing(self.path)
        except duckdb.IOException as exc:
            if not is_lock_error(exc):
                raise
            raise IndexBusy(
                f"the index {self.path} is in use by another mnemo process (an editor's server?); "
                "stop it or use that process"
            ) from exc
        if store is None:
            return False
        self.store = store
        self.opened.set()
        return True

    def writable_store(self) -> ChunkStore | None:
        """The open index when this process may give it vectors (this model's, not foreign), else None."""
        store = self.store
        if store is None or store.identity.dims == 0 or self.foreign:
            return None
        return store

    def embed_step(
        self,
        *,
        write_lock: contextlib.AbstractContextManager[object] | None = None,
        cancel: pending.Cancel | None = None,
        pause: Callable[[], None] | None = None,
    ) -> pending.StepResult | None:
        """Embed and commit one batch of pending chunks (:func:`mnemo.index.pending.embed_step`)."""
        return pending.embed_step(
            self.writable_store,
            self.embedder,
            write_lock=write_lock,
            cancel=cancel,
            pause=pause,
        )

    def _count_pending(self, report: SyncReport) -> None:
        store = self.writable_store()
        if store is not None:
            report.chunks_pending = store.counts().pending

    def recover(self) -> None:
        """After DuckDB invalidated the open database (an internal error): close it without writing,
        rewrite the file from its rows (:func:`mnemo.index.opening.salvage`) and reopen it. No index is
        open afterwards only when its rows could not be read (the next sync rebuilds it)."""
        with self.swap_lock:
            old, self.store = self.store, None
            self.opened.clear()
            if old is not None:
                old.close(checkpoint=False)
            with build_lock(self.dir):
                try:
                    opening.salvage(self.path, "DuckDB reported an internal error")
                except (duckdb.Error, OSError) as exc:
                    log.error("index %s could not be repaired: %s", self.path, exc)
                self._open_unlocked()

    @contextlib.contextmanager
    def reading(self, *, timeout: float = -1) -> Iterator[DuckReader | None]:
        """The read API (:class:`mnemo.index.api.IndexReader`) on the current generation, held against
        a swap; None with no index, or when a swap held the generation past ``timeout`` seconds (>= 0)."""
        if not self.swap_lock.acquire(timeout=timeout):
            yield None
            return
        try:
            store = self.store
            if store is None:
                yield None
                return
            con = store.reader()
            try:
                yield store.read_with(con)
            finally:
                con.close()
        finally:
            self.swap_lock.release()

    def close(self) -> None:
        with self.swap_lock:
            if self.store is not None:
                self.store.close()
                self.store = None

    def checkpoint(self) -> None:
        """DuckDB keeps the rows written since its last checkpoint in memory (inserted chunks with their
        vectors, vectors filled in place), and checkpoints only when its log passes 16 MB: five edits at
        2,000 notes held ~20 MB. Called when the writer has been quiet for a while (~60 ms there);
        nothing to do when the log is empty. The blocks the checkpoint read are released after it."""
        wal = repair.wal_path(self.path)
        if not wal.exists() or wal.stat().st_size == 0:
            return
        with self.swap_lock:
            store = self.store
            if store is not None:
                try:
                    store.checkpoint()
                except duckdb.Error as exc:  # (another transaction open: the next one will do)
                    log.debug("index checkpoint skipped: %s", exc)

    def load_caches(self) -> None:
        """The writer's caches of rows and vectors loaded now, before a read of the whole workspace
        (:meth:`mnemo.index.store.ChunkStore.load_caches`; the caller holds the write lock)."""
        with self.swap_lock:
            store = self.store
            if store is not None:
                try:
                    store.load_caches()
                except duckdb.Error as exc:  # (the read that needs them loads them)
                    log.debug("caches not loaded ahead: %s", exc)

    def release_buffers(self) -> None:
        """Evict the file's blocks DuckDB keeps once read, when the writer's caches hold what searches
        read (:meth:`mnemo.index.store.ChunkStore.release_buffers`; the caller holds the write lock)."""
        with self.swap_lock:
            store = self.store
            if store is not None:
                try:
                    store.release_buffers()
                except duckdb.Error as exc:
                    log.debug("DuckDB's buffers not released: %s", exc)

    # -- syncing ------------------------------------------------------------------------------
    def sync(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        replace: Replace = "chunker",
        vectors: VectorsWhen = "now",
    ) -> SyncReport:
        """Bring the index up to date with the files on disk. An index built for another model or
        chunker is rebuilt only as ``replace`` allows (or with ``full``); otherwise it is left as it is
        and ``files_stale`` counts the changes it misses.

        The keyword side of every file is committed first (chunks whose vectors are not in the embedding
        cache are written pending); with ``vectors="now"`` they are then embedded before returning."""
        started = time.perf_counter()
        report = SyncReport()
        if self.store is None:
            self.open()  # also before a full build: its cache is carried, a busy file is refused
        if full or self.store is None or self._replaces(replace):
            with build_lock(self.dir):
                if self.store is None and not full:
                    self._open_unlocked()  # another process may have built it while this one waited
                if full or self.store is None or self._replaces(replace):
                    self._rebuild(report, progress, cancel)
        store = self.store
        if report.rebuilt or store is None:
            pass
        elif self.foreign:
            report.files_stale = count_stale(store, self.workspace, self.settings.max_file_bytes)
        else:
            self._sync_into(store, report, progress, cancel, live=True)
        report.keyword_seconds = time.perf_counter() - started
        if vectors == "now":
            self.embed_pending(report, progress, cancel)
        else:
            self._count_pending(report)
        report.seconds = time.perf_counter() - started
        return report

    def _rebuild(self, report: SyncReport, progress: Progress | None, cancel: threading.Event | None) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            gitignore = self.dir / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n", encoding="utf-8")
            building = ChunkStore.create(self.dir / (INDEX_FILE + ".building"), self.identity())
        except OSError as exc:  # a read-only workspace, a full disk: say so, not a traceback
            raise IndexUnavailable(f"cannot write the index in {self.dir} ({exc.strerror or exc})") from exc
        if self.store is not None:
            building.copy_embedding_cache(self.store)
        else:
            building.import_embedding_cache(self.path)
        try:
            self._sync_into(building, report, progress, cancel, live=False)
            if progress:
                progress(report.files_seen, report.files_seen, "building search indexes")
            building.finish_indexes()
            with self.swap_lock:
                old = self.store
                self.store = None
                if old is not None:
                    old.close()
                building.swap_into(self.path)
                self.store = building
        except BaseException:
            building.close(checkpoint=False)  # (not .con: that would reopen a swapped-out file)
            raise
        self.opened.set()
        report.rebuilt = True

    def _sync_into(
        self,
        store: ChunkStore,
        report: SyncReport,
        progress: Progress | None,
        cancel: threading.Event | None,
        *,
        live: bool,
    ) -> None:
        """Write what changed on disk since ``store`` recorded it (:mod:`mnemo.index.disk_sync`)."""
        index_source = functools.partial(self._index_source, live=live)
        DiskSync(store, self.workspace, self.settings.max_file_bytes, index_source, live).run(
            report, progress, cancel
        )

    def index_text(self, memory_file: MemoryFile, text: str) -> SyncReport:
        """Index an editor buffer's unsaved text for ``memory_file`` (the buffer wins over the disk).
        Nothing is written to a foreign index (the buffer is indexed after its rebuild)."""
        assert self.store is not None, "index is not open"
        report = SyncReport(files_seen=1)
        if self.foreign:
            report.files_stale = 1
            return report
        source = decode_memory_bytes(text.encode("utf-8"), memory_file.kind)
        # A buffer's few changed chunks are embedded at once: the search that follows a keystroke sees them.
        self._index_source(
            self.store, memory_file, source, racy.UNSETTLED, len(text), report, live=True, embed=True
        )
        return report

    def remove(self, rel_path: str) -> None:
        assert self.store is not None, "index is not open"
        if self.foreign:
            return
        with self.store.transaction():
            self.store.delete_file(rel_path)

    def _index_source(
        self,
        store: ChunkStore,
        memory_file: MemoryFile,
        source: SourceText,
        mtime: float,
        size: int,
        report: SyncReport,
        *,
        live: bool,
        embed: bool = False,
    ) -> None:
        """Write one file (:func:`mnemo.index.file_rows.write_file`), embedding new chunks when ``embed``."""
        write_file(store, memory_file, source, (mtime, size), report, self.chunking, live=live, embed=embed,
                   vectors_for=lambda new: self._vectors(store, new, report, embed=embed))  # fmt: skip

    def _vectors(
        self, store: ChunkStore, chunks: Sequence[Chunk], report: SyncReport, *, embed: bool
    ) -> pending.Vectors | None:
        if store.identity.dims == 0:
            return None

        def one(text: str) -> np.ndarray:
            vector: np.ndarray = self.embedder.embed([text])[0]  # the embedder serialises its calls
            return vector

        found = pending.vectors_for(store, [embedding_input(c) for c in chunks], one if embed else None)
        report.chunks_embedded += found.embedded
        report.chunks_reused += found.cached
        return found
