"""IndexEngine: what the memory service needs of an index engine, the one protocol both engines meet.

:class:`mnemo.index.indexer.Indexer` (the workspace's DuckDB file) and
:class:`mnemo.index.pg_indexer.PgIndexer` (a shared PostgreSQL + pgvector, docs/team.md) both implement
it; :class:`mnemo.memory.service.MemoryService` and its parts type against it, so the composition root
hands either over without a cast (mypy checks both against it). Reads go through
:class:`mnemo.index.api.IndexReader`; what an engine's store offers the services beyond reads is
:class:`HistoryTables`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from mnemo.index import pending
from mnemo.index.api import IndexIdentity, IndexReader
from mnemo.index.feedback import FeedbackRow, RetrievedChunk
from mnemo.index.file_rows import Progress, Replace, SyncReport, VectorsWhen
from mnemo.workspace.layout import MemoryFile


class HistoryTables(Protocol):
    """An open index's history, kept across rebuilds: retrieval statistics (hovers and lenses) and
    feedback on chat turns (:mod:`mnemo.memory.feedback`; rows and tallies in :mod:`mnemo.index.feedback`)."""

    @property
    def identity(self) -> IndexIdentity: ...

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """Commit the writes inside on exit (roll back on an exception)."""
        ...

    def record_retrievals(self, rows: Sequence[tuple[object, ...]]) -> None: ...

    def retrieval_table(self) -> Any: ...

    def restore_retrievals(self, table: Any) -> None: ...

    def retrieved_between(
        self, queries: Sequence[str], start: datetime, end: datetime
    ) -> list[RetrievedChunk]:
        """Chunks that searches for any of ``queries`` returned in that span, each once, first returned first."""
        ...

    def replace_feedback(self, session_id: str, turn: int, signal: str, rows: Sequence[FeedbackRow]) -> None:
        """The rows of one turn's ``signal``, replacing earlier ones (inside :meth:`transaction`)."""
        ...

    def feedback_turns(self, session_id: str) -> set[tuple[int, str]]:
        """(turn, signal) pairs already recorded for a session."""
        ...


class IndexEngine(Protocol):
    @property
    def dir(self) -> Path:
        """The index folder (``[index] dir``): the writer lease and socket live there."""
        ...

    @property
    def path(self) -> Path:
        """The index file (a local cache of the engine for PostgreSQL: its stat cache)."""
        ...

    @property
    def opened(self) -> threading.Event:
        """Set once an index is open (a search at start-up waits on it)."""
        ...

    @property
    def store(self) -> HistoryTables | None:
        """The open index (None: none yet, or closed)."""
        ...

    @property
    def foreign(self) -> bool:
        """The open index was built for another model or chunker (read as it is, never rebuilt here)."""
        ...

    def identity(self) -> IndexIdentity: ...

    def vector_dims(self) -> int: ...

    def mismatch_note(self) -> str | None: ...

    def open(self) -> bool: ...

    def close(self) -> None: ...

    def recover(self) -> None: ...

    def reading(self, *, timeout: float = -1) -> contextlib.AbstractContextManager[IndexReader | None]: ...

    def sync(
        self,
        *,
        full: bool = False,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        replace: Replace = "chunker",
        vectors: VectorsWhen = "now",
    ) -> SyncReport: ...

    def index_text(self, memory_file: MemoryFile, text: str) -> SyncReport: ...

    def remove(self, rel_path: str) -> None: ...

    def embed_step(
        self,
        *,
        write_lock: contextlib.AbstractContextManager[object] | None = None,
        cancel: pending.Cancel | None = None,
        pause: Callable[[], None] | None = None,
    ) -> pending.StepResult | None: ...

    def embed_pending(
        self, report: SyncReport, progress: Progress | None = None, cancel: threading.Event | None = None
    ) -> None: ...

    def checkpoint(self) -> None:
        """Write to disk what the engine holds in memory for its last writes (idle time; the caller holds
        the write lock). Best effort: an engine with nothing of the kind does nothing."""
        ...

    def load_caches(self) -> None:
        """Load what the process keeps in memory of every row and vector now, before a read of the whole
        workspace, holding little else meanwhile (the caller holds the write lock). Best effort: an
        engine that keeps nothing of the kind does nothing."""
        ...

    def release_buffers(self) -> None:
        """Give back what the engine keeps in memory twice, once the process's own caches hold it (the
        caller holds the write lock). Best effort: an engine with nothing of the kind does nothing."""
        ...
