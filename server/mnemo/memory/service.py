"""MemoryService: the memory engine's one front door for the CLI, the LSP server and the gateway.

It owns the single index writer. Editor buffers are queued with :meth:`schedule_buffer` (never
blocking) and applied after a debounce; :meth:`search` applies whatever is still pending first, so a
search sees the text the user just typed instead of stale results.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import date
from typing import TypeVar

from mnemo.config import ConfigProblem, Settings
from mnemo.embeddings import Embedder, EmbeddingError, uses_bundled_english_model
from mnemo.errors import IndexBusy, MnemoError
from mnemo.index.duckdb_native import duckdb
from mnemo.index.engine import IndexEngine
from mnemo.index.indexer import Indexer, Progress, Replace, SyncReport
from mnemo.memory.background_vectors import FEW_PENDING, PendingVectors, Vectors
from mnemo.memory.buffers import EditorBuffers, apply_edits
from mnemo.memory.feedback import FeedbackBook, FeedbackResult
from mnemo.memory.index_opening import IndexOpening
from mnemo.memory.index_search import CheckedSearch, IndexSearch
from mnemo.memory.limits import check_search
from mnemo.memory.reading import FileLines, read_lines
from mnemo.memory.recording import RetrievalRecorder
from mnemo.memory.recovery import Recovery
from mnemo.memory.search_gate import SearchGate
from mnemo.memory.status import IndexState, IndexStatus, read_status
from mnemo.search.filters import check_filters
from mnemo.search.hybrid import HybridSearcher
from mnemo.search.results import SearchOutcome
from mnemo.workspace.layout import Workspace

log = logging.getLogger(__name__)

PENDING_WAIT_S = 2.0
"""How long a search waits for the writer to apply pending edits before answering with a note."""

T = TypeVar("T")


class MemoryService:
    def __init__(
        self,
        workspace: Workspace,
        settings: Settings,
        embedder: Embedder,
        config_problems: Sequence[ConfigProblem] = (),
        *,
        indexer: IndexEngine | None = None,
    ) -> None:
        """``indexer``: the index engine (default: the workspace's DuckDB file; the composition root
        passes :class:`mnemo.index.pg_indexer.PgIndexer` for ``[index] backend = "postgres"``)."""
        self.workspace = workspace
        self.settings = settings
        self.embedder = embedder
        self.config_problems = list(config_problems)
        self.indexer: IndexEngine = indexer or Indexer(workspace, embedder, settings.index, settings.chunking)
        self.index_state = IndexState()
        self._write_lock = threading.RLock()
        self.buffers = EditorBuffers(self._apply_pending_quietly)
        """Editor buffers waiting for the writer, and the open ones' texts (they win over the disk)."""
        self.generation = 0
        """Bumped after every write to the index (sync, edits, retrieval statistics): caches key on it."""
        self.recorder = RetrievalRecorder(self.indexer, self._write_lock, self._recovering, self._changed)
        self.retrievals = self.recorder.log
        """Search results waiting for the writer (recorded in the index's ``retrievals`` table)."""
        self.opening = IndexOpening(self.indexer, self._write_lock, self.index_state, self.flush_retrievals)
        """Opening the index, and handing it to another process (mnemo.memory.index_opening)."""
        self.feedback = FeedbackBook(
            workspace.root,
            self.indexer,
            self._write_lock,
            settings.search,
            self.flush_retrievals,
            self._changed,
            self.opening.open,
        )
        """Feedback on the chat turns that used each chunk, and the usefulness prior (mnemo.memory.feedback)."""
        self.recovery = Recovery(self.indexer, self._write_lock, self._repaired)
        """Repairs after DuckDB internal errors (calls that failed on one database repair it once)."""
        self.vectors = PendingVectors(
            self.indexer, self._write_lock, self._recovering, lambda: self.generation, self._changed
        )
        """Vectors committed after the keyword side: the embedding thread, counts and notes."""
        self.index_search = IndexSearch(
            embedder,
            settings.search,
            self.indexer,
            self.vectors,
            self.index_state,
            # The bundled all-MiniLM-L6-v2 is English-only: CJK queries lean on BM25 (cjk_vector_weight).
            english_only_vectors=uses_bundled_english_model(settings.embedding),
        )
        """The index part of a search: its turn at the gate, one reader, the ranking."""

    @property
    def searcher(self) -> HybridSearcher:
        """The searcher every search uses (one with another ``one_per_file`` shares its query vectors)."""
        return self.index_search.searcher

    @property
    def search_gate(self) -> SearchGate:
        """Searches let in at once, the others in order of arrival."""
        return self.index_search.gate

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
            self.opening.refuse_if_released()
            self.index_state.state = "indexing"
            try:
                if self.indexer.store is None:
                    self.opening.open()  # the existing index (repaired if need be), whatever its model
                saved = self.recorder.saved(full or self.indexer.foreign)
                saved_feedback = self.feedback.saved(full or self.indexer.foreign)
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
                    self.recorder.restore(saved)
                    self.feedback.restore(saved_feedback)
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
            apply_edits(self.indexer, self.workspace, self.buffers.open_texts(), self.vectors)
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
        delay = self.settings.server.debounce_ms / 1000 if delay_s is None else delay_s
        self.buffers.schedule(rel_path, text, delay)

    def has_pending(self) -> bool:
        """Edits not yet in the index: queued, or taken by a writer that is still applying them."""
        return self.buffers.has_pending()

    def _apply_pending_quietly(self) -> None:
        try:
            self.apply_pending()
        except Exception:
            log.exception("re-indexing edited buffers failed")

    def load_caches(self, timeout_s: float = -1) -> bool:
        """Have the index load what it keeps in memory of every row and vector, before a read of the
        whole workspace (a diagnostics pass). False when the writer stayed busy past ``timeout_s`` (the
        read loads them itself)."""
        return self._as_writer(self.indexer.load_caches, timeout_s)

    def release_buffers(self, timeout_s: float = -1) -> bool:
        """Let the index give back what it keeps in memory twice (after a whole-workspace read: the
        writer's caches now hold it). False when the writer stayed busy past ``timeout_s``."""
        return self._as_writer(self.indexer.release_buffers, timeout_s)

    def _as_writer(self, work: Callable[[], None], timeout_s: float) -> bool:
        """``work`` with the write lock held; False when the writer stayed busy past ``timeout_s``."""
        if not self._write_lock.acquire(timeout=timeout_s):
            return False
        try:
            work()
            return True
        finally:
            self._write_lock.release()

    def apply_pending(self, timeout_s: float = -1) -> bool:
        """Index queued buffers now. False when the writer stayed busy past ``timeout_s``."""
        return self._recovering(lambda: self._apply_pending(timeout_s))

    def _apply_pending(self, timeout_s: float) -> bool:
        if not self._write_lock.acquire(timeout=timeout_s):
            return False
        try:
            with self.buffers.taking() as pending:
                if self.indexer.store is None:  # nothing open yet: the sync that opens it applies them
                    self.buffers.put_back(pending)
                elif pending:
                    apply_edits(
                        self.indexer, self.workspace, pending, self.vectors, self.buffers.open_texts()
                    )
                    self.generation += 1
                    # An edit's write reads whole keyword tables (~12 MB of blocks at 2,000 notes) that
                    # DuckDB would keep until the quiet checkpoint, beside the rows it waits to write.
                    self.indexer.release_buffers()
            return True
        finally:
            self._write_lock.release()

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
        one_per_file: bool | None = None,
        cancelled: threading.Event | None = None,
    ) -> SearchOutcome:
        """``record=False``: an internal look-up (a duplicate check), not counted in retrieval statistics.
        ``filters``: a JSON object or :class:`~mnemo.search.filters.SearchFilters` (checked here).
        ``one_per_file``: only each file's best chunk (None: ``[search] one_per_file``). ``cancelled``:
        set by a caller that no longer wants the answer (an editor's search as the user types); a search
        still waiting for its turn (:mod:`mnemo.memory.search_gate`) then raises
        :class:`~mnemo.errors.SearchCancelled` instead of running."""
        query, max_results, notes = check_search(
            query, max_results, sources, self.settings.search.max_query_chars
        )
        ask = CheckedSearch(
            query=query,
            max_results=max_results,
            min_score=min_score,
            sources=sources,
            today=today,
            filters=check_filters(filters),
            one_per_file=one_per_file,
            cancelled=cancelled,
        )
        outcome = self._recovering(lambda: self._search(ask, notes))
        if record:
            self._record(outcome)
        return outcome

    def _search(self, ask: CheckedSearch, checked_notes: Sequence[str]) -> SearchOutcome:
        """The index part of :meth:`search` (its arguments already checked)."""
        notes = list(checked_notes)  # a retry after a repair starts again from these
        if self.has_pending() and not self.apply_pending(timeout_s=PENDING_WAIT_S):
            notes.append("the index is busy; edits from the last moments may be missing")
        self.ensure_open()
        return self.index_search.run(ask, notes)

    def record_feedback(self, session_id: str, turn: int | None, useful: bool) -> FeedbackResult:
        """Whether a chat turn's recalled memories helped (:meth:`FeedbackBook.record`; None: the latest turn)."""
        return self._recovering(lambda: self.feedback.record(session_id, turn, useful))

    def harvest_feedback(self, session_id: str) -> list[FeedbackResult]:
        """A transcript's implicit signals (:meth:`FeedbackBook.harvest`), repaired as any other write."""
        return self._recovering(lambda: self.feedback.harvest(session_id))

    # -- surviving DuckDB internal errors (mnemo.memory.recovery) ---------------------------------------
    def _recovering(self, call: Callable[[], T]) -> T:
        """Run ``call``; an internal DuckDB error repairs the index and runs it once more."""
        return self.recovery.run(call)

    def _repaired(self) -> None:
        self.generation += 1
        self.buffers.requeue_open()  # edits a failed write had taken are applied again

    # -- retrieval statistics (mnemo.memory.recording) -----------------------------------------------
    def _record(self, outcome: SearchOutcome) -> None:
        """Queue the results; a timer writes them shortly after (a search never waits for the write)."""
        self.recorder.record(outcome)

    def flush_retrievals(self, timeout_s: float = 1.0) -> bool:
        """Write queued retrieval statistics now (hovers and lenses call this before reading them)."""
        return self.recorder.flush(timeout_s)

    def ensure_open(self) -> None:
        """Open an existing compatible index; while a sync holds the writer, wait for it to open one."""
        self.opening.ensure_open()

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> FileLines:
        """Read lines of a memory file (the unsaved buffer when the editor has one)."""
        return read_lines(self.workspace, self.buffers.open_texts(), path, from_line, lines)

    def status(self) -> IndexStatus:
        """State, counts, model and problems; ``notes`` says when the index was built for another model."""
        return self._recovering(self._status)

    def _status(self) -> IndexStatus:
        return read_status(
            self.indexer,
            self.vectors,
            self.index_state,
            workspace=str(self.workspace.root),
            provider=self.settings.embedding.provider,
            wanted=self.embedder.provider != "none",  # (dims could load the model)
            config_problems=[str(p) for p in self.config_problems],
        )

    def release_index(self) -> None:
        """Close the index file so another process can write it (:mod:`mnemo.memory.index_opening`)."""
        self.opening.release()

    def reclaim_index(self) -> None:
        """This process writes the index again: the next call that needs it reopens it."""
        self.opening.reclaim()

    def close(self) -> None:
        self.vectors.close()
        self.buffers.close()
        self.recorder.close()
        self.flush_retrievals(timeout_s=5.0)
        with self._write_lock:
            self.indexer.close()
        self.embedder.close()
