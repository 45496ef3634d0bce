"""PgIndexer: keeps a namespace of the shared PostgreSQL index in step with this machine's workspace.

It has the surface of :class:`mnemo.index.indexer.Indexer` that :class:`mnemo.memory.service.MemoryService`
uses (open, sync, index_text, remove, reading, pending vectors), so the service, the search and the
fronts work unchanged with ``[index] backend = "postgres"``. What differs from the DuckDB engine:

- several processes on several machines write at once: each file is one transaction keyed by content
  hash (:meth:`mnemo.index.pg_store.PgStore.replace_file`), a machine writes what changed on its own
  disk (:mod:`mnemo.index.pg_sync`), and pending chunks are claimed before they are embedded;
- a namespace built with another model or chunker is read as it is (keyword-only for another model),
  and ``mnemo index`` (``replace="any"``) or ``--full`` builds a new generation and swaps it in
  (:mod:`mnemo.index.pg_build`); readers never see a half-built one;
- there is nothing to repair after a crash: PostgreSQL rolls an interrupted transaction back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.embeddings import Embedder
from mnemo.errors import IndexUnavailable, SearchCancelled
from mnemo.index import pending, pg_build, pg_schema, racy
from mnemo.index.file_rows import Progress, Replace, SyncReport, VectorsWhen
from mnemo.index.matching import IdentityMatch
from mnemo.index.pg_connect import DSN_ENV, ReaderPool, connect
from mnemo.index.pg_filters import AllowedMemo
from mnemo.index.pg_memos import PostingsMemo, WeightsMemo
from mnemo.index.pg_prefetch import PostingsPrefetch
from mnemo.index.pg_reader import HNSW_EF_SEARCH, SNAPSHOT_SETTINGS, PgReader
from mnemo.index.pg_store import PgStore
from mnemo.index.pg_sync import StatCache, cache_path
from mnemo.index.sources import SourceText, decode_memory_bytes, read_memory_file
from mnemo.workspace.layout import MemoryFile, Workspace

log = logging.getLogger(__name__)

VACUUM_EVERY_S = 600.0
"""A sync vacuums the postings at most this often (:meth:`PgIndexer._keep_visible`)."""


@contextlib.contextmanager
def _database_errors(doing: str) -> Iterator[None]:
    """psycopg errors as :class:`IndexUnavailable` (its message names no DSN)."""
    try:
        yield
    except psycopg.Error as exc:
        raise IndexUnavailable(
            f"PostgreSQL index: {doing} failed: {str(exc).strip().splitlines()[0]}"
        ) from exc


class PgIndexer(IdentityMatch):
    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        index_settings: IndexSettings,
        chunking: ChunkingSettings,
        *,
        dsn: str,
        namespace: str,
    ) -> None:
        self.workspace = workspace
        self.embedder = embedder
        self.settings = index_settings
        self.chunking = chunking
        self.namespace = namespace
        self.dir = workspace.root / index_settings.dir
        """Local state (the stat cache, the gateway's session table): the database holds the index."""
        self.path = Path(f"postgresql:{namespace}")
        """What ``status`` shows as the index (the DSN is never shown)."""
        self._dsn = dsn
        try:
            where = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:  # its message may quote the DSN, which may hold a password
            raise IndexUnavailable(f"{DSN_ENV} is not a valid PostgreSQL connection string") from None
        database = f"{where.get('host', '')}:{where.get('port', '')}/{where.get('dbname', '')}"
        self.stat_cache_path = cache_path(self.dir, namespace, database)
        """This machine's stat cache for the namespace in this database (:mod:`mnemo.index.pg_sync`)."""
        self.store: PgStore | None = None
        self._con: psycopg.Connection | None = None
        self._schema_ready = False
        self.buffered: set[str] = set()
        """Paths indexed from an editor buffer since the last sync: it compares the disk with the index."""
        self._vector_indexes: set[int] = set()
        """Generations whose HNSW index is known to be built."""
        self._vacuumed_at = -math.inf
        """When a sync last vacuumed the postings (:meth:`_keep_visible`; ``time.monotonic``)."""
        self._schema_lock = threading.Lock()
        self.readers = ReaderPool(dsn, SNAPSHOT_SETTINGS)
        self.postings = PostingsMemo()
        """Recently used postings of this process's searches (valid while the generation is unchanged)."""
        self.prefetch = PostingsPrefetch(lambda: ReaderPool(self._dsn), self.postings)
        """Reads in the background the postings pruned searches lacked, into :attr:`postings`."""
        self.allowed = AllowedMemo()
        """Recently used search filters' chunk ids (valid while the generation is unchanged)."""
        self.weights = WeightsMemo()
        """Recent queries' term statistics (valid while the generation's postings are unchanged)."""
        self.swap_lock = threading.RLock()
        self.opened = threading.Event()

    # -- identity -----------------------------------------------------------------------------------
    def writable_store(self) -> PgStore | None:
        store = self.store
        if store is None or store.identity.dims == 0 or self.foreign:
            return None
        return store

    # -- opening ----------------------------------------------------------------------------------------
    def _ensure_schema(self) -> None:
        """Migrate the schema once per process (before any connection loads pgvector's types)."""
        with self._schema_lock:
            if not self._schema_ready:
                plain = connect(self._dsn, vectors=False)
                try:
                    pg_schema.migrate(plain)
                finally:
                    plain.close()
                self._schema_ready = True

    def _writer(self) -> psycopg.Connection:
        """The writer's connection."""
        self._ensure_schema()
        if self._con is None or self._con.closed:
            self._con = connect(self._dsn)
        return self._con

    def open(self) -> bool:
        """Connect, migrate the schema and take the namespace's live generation; False: there is none yet."""
        with _database_errors("opening"), self.swap_lock:
            con = self._writer()
            live = pg_schema.live_generation(con, self.namespace)
            if live is None:
                self.store = None
                return False
            if self.store is None or self.store.g != live.id or self.store.con is not con:
                self.store = PgStore(con, live)  # another machine may have swapped in a rebuild
            self.opened.set()
            return True

    def recover(self) -> None:
        """Nothing to salvage (PostgreSQL rolled back what was interrupted): reconnect."""
        self.close()
        self.open()

    @contextlib.contextmanager
    def reading(self, *, timeout: float = -1) -> Iterator[PgReader | None]:
        """A reader on the namespace's live generation, in one snapshot; None when there is none."""
        del timeout  # readers never wait for writers here
        with _database_errors("reading"):
            self._ensure_schema()
        with _database_errors("reading"), self.readers.snapshot() as con:
            live = pg_schema.live_generation(con, self.namespace)
            store = self.store
            if live is not None and store is not None and live.id != store.g:
                with self.swap_lock:
                    self.store = PgStore(store.con, live)
            yield (
                None
                if live is None
                else PgReader(
                    con, live, self.postings, self.allowed, self.weights, HNSW_EF_SEARCH, self.prefetch
                )
            )

    def close(self) -> None:
        self.prefetch.close()
        with self.swap_lock:
            con, self._con, self.store = self._con, None, None
            if con is not None:
                with contextlib.suppress(psycopg.Error):
                    con.close()
        self.readers.close()
        self.readers = ReaderPool(self._dsn, SNAPSHOT_SETTINGS)

    def checkpoint(self) -> None:
        """Nothing to do: PostgreSQL writes its own checkpoints."""

    def load_caches(self) -> None:
        """Nothing to do: rows and vectors are read from the server as searches need them."""

    def release_buffers(self) -> None:
        """Nothing to do: the database's buffers are the server's, not this process's."""

    # -- pending vectors ---------------------------------------------------------------------------------
    def embed_step(
        self,
        *,
        write_lock: contextlib.AbstractContextManager[object] | None = None,
        cancel: pending.Cancel | None = None,
        pause: Callable[[], None] | None = None,
    ) -> pending.StepResult | None:
        with _database_errors("embedding"):
            step = pending.embed_step(
                self.writable_store, self.embedder, write_lock=write_lock, cancel=cancel, pause=pause
            )
            if step is None or step.pending == 0:
                self._finish_vectors()
            return step

    def _finish_vectors(self) -> None:
        """Every vector is in: build the generation's HNSW index if nobody has (on a connection of its
        own, so this process's syncs go on meanwhile)."""
        store = self.writable_store()
        if store is None or store.g in self._vector_indexes:
            return
        con = connect(self._dsn, vectors=False)
        try:
            pg_schema.ensure_vector_index(con, store.generation)
            if pg_schema.has_vector_index(con, store.g):
                self._vector_indexes.add(store.g)
            pg_build.keep_visible(con)  # a build's own vacuum may have been held back (see there)
        except psycopg.errors.InsufficientPrivilege:
            self._vector_indexes.add(store.g)  # said once: searches scan the vectors exactly meanwhile
            log.warning(
                "the HNSW index of namespace %s needs the tables' owner: run `mnemo index` once as the "
                "owner role (docs/team.md); nearest neighbours are found by an exact scan until then",
                self.namespace,
            )
        finally:
            con.close()

    def _count_pending(self, report: SyncReport) -> None:
        store = self.writable_store()
        if store is not None:
            with _database_errors("counting"):
                report.chunks_pending = store.counts().pending

    # -- syncing -----------------------------------------------------------------------------------------
    def sync(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        replace: Replace = "chunker",
        vectors: VectorsWhen = "now",
    ) -> SyncReport:
        """Write what changed on this disk; build a new generation when there is none, when ``full``,
        or when the live one is of another model or chunker and ``replace`` allows."""
        started = time.perf_counter()
        report = SyncReport()
        with _database_errors("indexing"):
            opened = self.open()
            if full or not opened or self._replaces(replace):
                self._build(report, progress, cancel, replace_live=full or opened)
            elif self.foreign:
                report.files_stale = self._stat_cache().count_changed(
                    self.workspace, self.settings.max_file_bytes
                )
            else:
                pg_build.sync_files(self, report, progress, cancel)
                self._keep_visible()  # (a build has just vacuumed)
        report.keyword_seconds = time.perf_counter() - started
        if vectors == "now":
            self.embed_pending(report, progress, cancel)
        else:
            self._count_pending(report)
        report.seconds = time.perf_counter() - started
        return report

    def _keep_visible(self) -> None:
        """:func:`mnemo.index.pg_build.keep_visible` at most once every :data:`VACUUM_EVERY_S`: while
        something holds an old snapshot for hours, every sync would otherwise vacuum in vain."""
        now = time.monotonic()
        if now - self._vacuumed_at >= VACUUM_EVERY_S and pg_build.keep_visible(self._writer()):
            self._vacuumed_at = now

    def _build(
        self,
        report: SyncReport,
        progress: Progress | None,
        cancel: threading.Event | None,
        *,
        replace_live: bool,
    ) -> None:
        con = self._writer()
        built = pg_build.build(self, con, report, progress, cancel, replace_live=replace_live)
        with self.swap_lock:
            self.store = PgStore(con, built)
        self.opened.set()

    def _stat_cache(self) -> StatCache:
        assert self.store is not None
        return StatCache(self.stat_cache_path, self.store.g)

    def index_text(self, memory_file: MemoryFile, text: str) -> SyncReport:
        """Index an editor buffer's unsaved text (its new chunks embedded at once)."""
        report = SyncReport(files_seen=1)
        if self.store is None or self.foreign:
            report.files_stale = 1
            return report
        source = decode_memory_bytes(text.encode("utf-8"), memory_file.kind)
        with _database_errors("indexing a buffer"):
            pg_build.write_file(self, memory_file, source, racy.UNSETTLED, len(text), report, embed=True)
        self.buffered.add(memory_file.path)  # the next sync reads the disk's text again
        return report

    def remove(self, rel_path: str) -> None:
        if self.store is None or self.foreign:
            return
        with _database_errors("removing a file"), self.store.transaction():
            self.store.delete_file(rel_path)
        cache = self._stat_cache()
        cache.forget(rel_path)
        cache.save()

    def read_source(self, memory_file: MemoryFile) -> SourceText:
        return read_memory_file(
            self.workspace.root / memory_file.path, memory_file.kind, self.settings.max_file_bytes
        )

    def check_cancel(self, cancel: threading.Event | None) -> None:
        if cancel is not None and cancel.is_set():
            raise SearchCancelled("indexing cancelled")
