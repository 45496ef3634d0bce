"""MemoryService: the memory engine's one front door for the CLI, the LSP server and the gateway.

It owns the single index writer. Editor buffers are queued with :meth:`schedule_buffer` (never
blocking) and applied after a debounce; :meth:`search` applies whatever is still pending first, so a
search sees the text the user just typed instead of stale results.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal, TypeVar

import duckdb
import pyarrow as pa

from mnemo.config import ConfigProblem, Settings
from mnemo.embeddings import Embedder, EmbeddingError, uses_bundled_english_model
from mnemo.errors import IndexBusy, IndexUnavailable, MnemoError
from mnemo.index import pending
from mnemo.index.indexer import Indexer, Progress, Replace, SyncReport
from mnemo.index.repair import BROKEN_DATABASE
from mnemo.index.store import ChunkStore
from mnemo.memory.background_vectors import PendingVectors
from mnemo.memory.limits import check_line_range, check_max_results, check_sources, cut_query
from mnemo.memory.retrievals import RetrievalLog
from mnemo.search.filters import SearchFilters, check_filters
from mnemo.search.hybrid import HybridSearcher, SearchOutcome
from mnemo.workspace.layout import Workspace, WorkspacePathError

log = logging.getLogger(__name__)

STARTUP_WAIT_S = 30.0
"""How long a search at start-up waits for an existing index to open (not for a first build)."""
PENDING_WAIT_S = 2.0
"""How long a search waits for the writer to apply pending edits before answering with a note."""
RETRIEVAL_FLUSH_DELAY_S = 0.5
"""Search results are written to the retrievals table this long after a search, off its path."""

FEW_PENDING = pending.EMBED_BATCH
"""``vectors="few"``: at most this many pending chunks are embedded before a read answers."""

Vectors = Literal["wait", "background", "later", "few"]
"""When a sync's pending chunks get their vectors (the keyword side is always committed first):
``wait`` before it returns; ``background`` on the embedding thread (:meth:`MemoryService.embed_in_background`);
``later`` not in this call; ``few`` now when at most FEW_PENDING are pending (a read: `mnemo search`),
else later. Default: ``background`` once the thread was started, else ``wait``."""

T = TypeVar("T")


@dataclass
class IndexState:
    state: str = "not indexed"  # not indexed | indexing | ready | error
    done: int = 0
    total: int = 0
    current: str = ""
    message: str = ""
    last_report: SyncReport | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)


class MemoryService:
    def __init__(
        self,
        workspace: Workspace,
        settings: Settings,
        embedder: Embedder,
        config_problems: Sequence[ConfigProblem] = (),
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.embedder = embedder
        self.config_problems = list(config_problems)
        self.indexer = Indexer(workspace, embedder, settings.index, settings.chunking)
        self.searcher = HybridSearcher(
            embedder,
            settings.search,
            self.indexer.embed_lock,
            # The bundled all-MiniLM-L6-v2 is English-only: CJK queries lean on BM25 (cjk_vector_weight).
            english_only_vectors=uses_bundled_english_model(settings.embedding),
        )
        self.index_state = IndexState()
        self._write_lock = threading.RLock()
        self._pending: dict[str, str | None] = {}
        self._pending_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._buffers: dict[str, str] = {}
        self._applying = False
        self._retrieval_timer: threading.Timer | None = None
        self._closed = False
        self.generation = 0
        """Bumped after every write to the index (sync, edits, retrieval statistics): caches key on it."""
        self.retrievals = RetrievalLog()
        """Search results waiting for the writer (recorded in the index's ``retrievals`` table)."""
        self._recoveries = 0
        """Repairs after DuckDB internal errors (calls that failed on one database repair it once)."""
        self.vectors = PendingVectors(
            self.indexer, self._write_lock, self._recovering, lambda: self.generation, self._changed
        )
        """Vectors committed after the keyword side: the embedding thread, counts and notes."""

    # -- indexing -------------------------------------------------------------------------------
    def sync(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        replace: Replace = "chunker",
        vectors: Vectors | None = None,
    ) -> SyncReport:
        """Bring the index up to date with the disk (a full rebuild when needed or asked for).

        An index built for another provider or model is replaced only with ``replace="any"`` (what
        ``mnemo index`` asks) or ``full``; one built with another chunker but the same model also by
        default (the server's syncs); ``replace="none"`` leaves any as it is (a read's sync).
        ``vectors``: when new chunks are embedded (:data:`Vectors`)."""
        when = vectors or ("background" if self.vectors.enabled else "wait")
        report = self._recovering(lambda: self._sync(full, progress, cancel, replace, when))
        if when == "background":
            self.vectors.wake()
        return report

    def _sync(
        self,
        full: bool,
        progress: Progress | None,
        cancel: threading.Event | None,
        replace: Replace,
        vectors: Vectors,
    ) -> SyncReport:

        def track(done: int, total: int, current: str) -> None:
            self.index_state.done, self.index_state.total, self.index_state.current = done, total, current
            if progress:
                progress(done, total, current)

        with self._write_lock:
            self.index_state.state = "indexing"
            try:
                if self.indexer.store is None:
                    self.indexer.open()  # the existing index (repaired if need be), whatever its model
                saved = self._saved_retrievals(full or self.indexer.foreign)
                report = self.indexer.sync(
                    full=full,
                    progress=track,
                    cancel=cancel,
                    replace=replace,
                    vectors="now" if vectors == "wait" else "later",
                )
                if vectors == "few" and 0 < report.chunks_pending <= FEW_PENDING:
                    self.indexer.embed_pending(report, track, cancel)
                if report.rebuilt:
                    self._restore_retrievals(saved)
            except duckdb.IOException as exc:
                self.index_state.state, self.index_state.message = "error", str(exc)
                raise IndexBusy(
                    f"the index {self.indexer.path} is in use by another mnemo process "
                    "(an editor's server?); stop it or use that process"
                ) from exc
            except (EmbeddingError, MnemoError, duckdb.Error, OSError) as exc:
                self.index_state.state, self.index_state.message = "error", str(exc)
                raise
            # Buffers open in the editor win over the disk.
            for rel, text in list(self._buffers.items()):
                memory_file = self.workspace.classify(rel)
                if memory_file is not None:
                    self.indexer.index_text(memory_file, text)
            self.index_state.state = "ready"
            self.index_state.message = self.indexer.mismatch_note() or ""
            self.index_state.last_report = report
            self.index_state.problems = report.problems
            self.retrievals.flush(self.indexer.store)
            self.generation += 1
            return report

    # -- vectors after the keyword side (mnemo.memory.background_vectors) ---------------------------------
    def embed_in_background(self, cancel: threading.Event | None = None) -> None:
        """From now on syncs commit the keyword side and return; a worker thread embeds the pending
        chunks (newest and evergreen first). ``cancel`` interrupts its batch in hand (shutdown)."""
        self.vectors.start(cancel)

    def on_vectors_ready(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the embedding thread) each time the background embedding has caught up."""
        self.vectors.idle_listeners.append(listener)

    def wait_for_vectors(
        self, progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None
    ) -> bool:
        """Until every pending chunk has its vector (True) or ``cancel`` (False); progress: (embedded, all)."""
        return self.vectors.wait(progress, cancel)

    def vector_counts(self) -> tuple[int, int]:
        """(chunks with a vector, chunks) of the open index."""
        return self.vectors.counts()

    def _changed(self) -> int:
        self.generation += 1
        return self.generation

    def schedule_buffer(self, rel_path: str, text: str | None, *, delay_s: float | None = None) -> None:
        """Queue an editor buffer's text (None: re-read from disk) for indexing after the debounce."""
        if self.workspace.classify(rel_path) is None:
            return
        with self._pending_lock:
            self._pending[rel_path] = text
            if text is None:
                self._buffers.pop(rel_path, None)
            else:
                self._buffers[rel_path] = text
            if self._timer is not None:
                self._timer.cancel()
            delay = self.settings.server.debounce_ms / 1000 if delay_s is None else delay_s
            self._timer = threading.Timer(delay, self._apply_pending_quietly)
            self._timer.daemon = True
            self._timer.start()

    def has_pending(self) -> bool:
        """Edits not yet in the index: queued, or taken by a writer that is still applying them."""
        with self._pending_lock:
            return bool(self._pending) or self._applying

    def _apply_pending_quietly(self) -> None:
        try:
            self.apply_pending()
        except Exception:
            log.exception("re-indexing edited buffers failed")

    def apply_pending(self, timeout_s: float = -1) -> bool:
        """Index queued buffers now. False when the writer stayed busy past ``timeout_s``."""
        return self._recovering(lambda: self._apply_pending(timeout_s))

    def _apply_pending(self, timeout_s: float) -> bool:
        if not self._write_lock.acquire(timeout=timeout_s):
            return False
        try:
            with self._pending_lock:
                pending, self._pending = self._pending, {}
                self._applying = bool(pending)
            try:
                return self._apply(pending)
            finally:
                with self._pending_lock:
                    self._applying = False
        finally:
            self._write_lock.release()

    def _apply(self, pending: dict[str, str | None]) -> bool:
        """Index taken-over pending edits (the caller holds the writer lock)."""
        if self.indexer.store is None:
            with self._pending_lock:
                self._pending = {**pending, **self._pending}
            return True
        for rel, text in pending.items():
            memory_file = self.workspace.classify(rel)
            if memory_file is None:
                continue
            if text is not None:
                self.indexer.index_text(memory_file, text)
            elif (
                self.workspace.root / rel
            ).is_file():  # cheap: only files whose mtime or size changed are read
                self.indexer.sync(vectors="later" if self.vectors.enabled else "now")
                self.vectors.wake()
            else:
                self.indexer.remove(rel)
        if pending:
            self.generation += 1
        return True

    # -- queries --------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        today: date | None = None,
        record: bool = True,
        filters: object = None,
    ) -> SearchOutcome:
        """``record=False``: an internal look-up (a duplicate check), not counted in retrieval statistics.
        ``filters``: a JSON object or :class:`~mnemo.search.filters.SearchFilters` (checked here)."""
        max_results = check_max_results(max_results)
        check_sources(sources)
        checked = check_filters(filters)
        query, cut = cut_query(query, self.settings.search.max_query_chars)
        notes: list[str] = [cut] if cut else []
        outcome = self._recovering(
            lambda: self._search(
                query,
                notes,
                max_results=max_results,
                min_score=min_score,
                sources=sources,
                today=today,
                filters=checked,
            )
        )
        if record:
            self._record(outcome)
        return outcome

    def _search(
        self,
        query: str,
        checked_notes: Sequence[str],
        *,
        max_results: int | None,
        min_score: float | None,
        sources: Sequence[str] | None,
        today: date | None,
        filters: SearchFilters | None = None,
    ) -> SearchOutcome:
        """The index part of :meth:`search` (its arguments already checked)."""
        notes = list(checked_notes)  # a retry after a repair starts again from these
        if self.has_pending() and not self.apply_pending(timeout_s=PENDING_WAIT_S):
            notes.append("the index is busy; edits from the last moments may be missing")
        self.ensure_open()
        with self.indexer.reading() as found:
            if found is None:
                raise IndexUnavailable(
                    "the index is not built yet"
                    + (
                        f" ({self.index_state.done}/{self.index_state.total} files)"
                        if self.index_state.total
                        else ""
                    )
                    + "; run `mnemo index` or wait for the server to finish indexing"
                )
            store, con = found
            dims, mismatch = self.indexer.vector_dims(), self.indexer.mismatch_note()
            embedded, total = self.vectors.counts(con) if dims > 0 else (0, 0)
            if dims > 0 and embedded < total:
                notes.append(self.vectors.note(embedded, total))
                if embedded == 0:  # nothing to compare a query vector with yet
                    dims = 0
            with self.vectors.searching():  # the embedding thread lets the query's embedding go first
                outcome = self.searcher.search(
                    con,
                    query,
                    dims=dims,
                    max_results=max_results,
                    min_score=min_score,
                    sources=sources,
                    today=today,
                    postings=store.postings,
                    filters=filters,
                )
        outcome.notes.extend(notes)
        if mismatch:  # an index built for another model: searched as it is, never rebuilt by a read
            outcome.notes.append(mismatch)
        elif store.identity.dims == 0:
            outcome.notes.append("keyword-only mode: no embedding provider (embedding.provider = none)")
        return outcome

    # -- surviving DuckDB internal errors -----------------------------------------------------------
    def _recovering(self, call: Callable[[], T]) -> T:
        """Run ``call``; when DuckDB invalidates the database under it (an internal error such as
        "Failed to add to the HNSW index: Duplicate keys"), repair the index and run it once more.
        A second failure is answered with a clear error; the process never dies of it."""
        seen = self._recoveries
        try:
            return call()
        except BROKEN_DATABASE as exc:
            self._recover(seen, exc)
        seen = self._recoveries
        try:
            return call()
        except BROKEN_DATABASE as exc:
            self._recover(seen, exc)
            raise IndexUnavailable(
                f"the index failed with an internal DuckDB error ({str(exc).splitlines()[0]}) and was "
                "repaired; try again, or rebuild it with `mnemo index --full`"
            ) from exc

    def _recover(self, seen: int, exc: BaseException) -> None:
        """Close the invalidated database, rewrite the index from its rows and reopen it (once for
        all the calls that failed on the same database)."""
        with self._write_lock:
            if self._recoveries != seen:
                return  # another call repaired it already
            self._recoveries += 1
            log.error("DuckDB reported an internal error; repairing the index: %s", exc)
            self.indexer.recover()
            self.generation += 1
            with self._pending_lock:  # edits a failed write had taken are applied again
                for rel, text in self._buffers.items():
                    self._pending.setdefault(rel, text)

    # -- retrieval statistics ---------------------------------------------------------------------
    def _record(self, outcome: SearchOutcome) -> None:
        """Queue the results; a timer writes them shortly after (a search never waits for the write)."""
        self.retrievals.queue(outcome)
        with self._pending_lock:
            if self._retrieval_timer is None:
                self._retrieval_timer = threading.Timer(RETRIEVAL_FLUSH_DELAY_S, self._flush_retrievals_later)
                self._retrieval_timer.daemon = True
                self._retrieval_timer.start()

    def flush_retrievals(self, timeout_s: float = 1.0) -> bool:
        """Write queued retrieval statistics now (hovers and lenses call this before reading them)."""
        return self._recovering(lambda: self._flush_retrievals(timeout_s))

    def _flush_retrievals(self, timeout_s: float) -> bool:
        if not self.retrievals.pending():
            return True
        if not self._write_lock.acquire(timeout=timeout_s):
            return False
        try:
            self.retrievals.flush(self.indexer.store)
            self.generation += 1
        finally:
            self._write_lock.release()
        return True

    def _flush_retrievals_later(self) -> None:
        with self._pending_lock:
            self._retrieval_timer = None
        if not self.flush_retrievals(timeout_s=0):  # the writer is busy: try again a little later
            with self._pending_lock:
                if self._retrieval_timer is None and not self._closed:
                    self._retrieval_timer = threading.Timer(
                        RETRIEVAL_FLUSH_DELAY_S, self._flush_retrievals_later
                    )
                    self._retrieval_timer.daemon = True
                    self._retrieval_timer.start()

    def _saved_retrievals(self, full: bool) -> pa.Table | None:
        """Statistics to carry into a rebuilt index (read only when a rebuild may happen)."""
        store = self.indexer.store
        if store is not None:
            return store.retrieval_table() if full else None
        return ChunkStore.read_retrieval_table(self.indexer.path)

    def _restore_retrievals(self, saved: pa.Table | None) -> None:
        if saved is None or self.indexer.store is None:
            return
        try:
            self.indexer.store.restore_retrievals(saved)
        except duckdb.Error as exc:  # an older layout: statistics are history, not worth failing for
            log.warning("retrieval statistics were not carried over the rebuild: %s", exc)

    def ensure_open(self) -> None:
        """Open an existing compatible index; while a sync holds the writer, wait for it to open one."""
        if self.indexer.store is not None:
            return
        if self._write_lock.acquire(blocking=False):
            try:
                if self.indexer.store is None:
                    self.indexer.open()
            finally:
                self._write_lock.release()
        else:  # a sync is running: it opens the existing index first, or builds one
            self.indexer.opened.wait(STARTUP_WAIT_S)

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> dict[str, Any]:
        """Read lines of a memory file (the unsaved buffer when the editor has one)."""
        from_line, lines = check_line_range(from_line, lines)
        resolved, memory_file = self.workspace.resolve_memory_path(path)
        text = self._buffers.get(memory_file.path)
        if text is None:
            data = resolved.read_bytes()
            if b"\x00" in data[:8192]:
                raise WorkspacePathError(f"{path}: binary file, not Markdown")
            text = data.decode("utf-8-sig", errors="replace")
        all_lines = text.splitlines()
        start = max(1, from_line or 1)
        if start > max(1, len(all_lines)):
            raise WorkspacePathError(f"{path}: from={start} is past the end ({len(all_lines)} lines)")
        count = len(all_lines) - start + 1 if lines is None else max(0, lines)
        chosen = all_lines[start - 1 : start - 1 + count]
        return {
            "path": memory_file.path,
            "from": start,
            "lines": len(chosen),
            "totalLines": len(all_lines),
            "text": "\n".join(chosen),
        }

    def status(self) -> dict[str, Any]:
        """State, counts, model and problems; ``notes`` says when the index was built for another model."""
        return self._recovering(self._status)

    def _status(self) -> dict[str, Any]:
        counts = {"files": 0, "chunks": 0}
        state = self.index_state
        file_problems = list(state.problems)
        with self.indexer.reading() as found:
            store = found[0] if found is not None else None
            if found is not None:
                reader = found[1]
                row = reader.execute(
                    "SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM chunks)"
                ).fetchone()
                # Problems of every indexed file, not only those (re)read by the last sync.
                file_problems = reader.execute(
                    "SELECT path, problem FROM files WHERE problem IS NOT NULL ORDER BY path"
                ).fetchall()
                counts = {"files": int(row[0]), "chunks": int(row[1])} if row else counts
            wanted = self.embedder.provider != "none"  # (dims could load the model)
            vectors = self.indexer.vector_dims() > 0 if store is not None else wanted
            mismatch = self.indexer.mismatch_note()
            embedded, total = self.vectors.counts(found[1]) if found is not None and vectors else (0, 0)
        notes = [mismatch] if mismatch else []
        if embedded < total:
            notes.append(self.vectors.note(embedded, total))
        provider = self.settings.embedding.provider
        return {
            "workspace": str(self.workspace.root),
            "index": str(self.indexer.path),
            "state": state.state,
            "progress": {"done": state.done, "total": state.total, "current": state.current},
            "message": state.message,
            **counts,
            "provider": provider,
            "model": store.identity.model if store is not None else "",
            "dims": store.identity.dims if store is not None else 0,
            "mode": "hybrid" if vectors else "keyword",
            "vectors": {"embedded": embedded, "chunks": total, "embedding": self.vectors.busy()},
            "notes": notes,
            "configProblems": [str(p) for p in self.config_problems],
            "fileProblems": [{"path": p, "problem": m} for p, m in file_problems],
        }

    def release_index(self) -> None:
        """Close the index file so another process can write it; the next call that needs it reopens it."""
        self.flush_retrievals(timeout_s=5.0)
        with self._write_lock:
            self.indexer.close()
            self.indexer.opened.clear()
            self.index_state.state = "released"

    def close(self) -> None:
        self.vectors.close()
        with self._pending_lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self._retrieval_timer is not None:
                self._retrieval_timer.cancel()
        self.flush_retrievals(timeout_s=5.0)
        with self._write_lock:
            self.indexer.close()
        self.embedder.close()
