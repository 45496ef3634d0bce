"""IdentityMatch: how an engine's indexer (:class:`mnemo.index.indexer.Indexer`,
:class:`mnemo.index.pg_indexer.PgIndexer`) compares the open index with what this process would build:
foreign (read-only here), same model (its vectors are searchable), the note that says why, and whether a
sync replaces it; and the loop that embeds what is pending, batch by batch. One definition, so both
engines decide and embed alike."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Protocol

from mnemo.config import ChunkingSettings
from mnemo.embeddings import Embedder
from mnemo.index import pending
from mnemo.index.api import IndexIdentity
from mnemo.index.file_rows import Progress, Replace, SyncReport
from mnemo.index.identity import chunker_id, mismatch_message


class _Identified(Protocol):
    @property
    def identity(self) -> IndexIdentity: ...


class IdentityMatch:
    """Mixed into an indexer that sets ``embedder``, ``chunking`` and ``store`` (None: no open index)."""

    embedder: Embedder
    chunking: ChunkingSettings
    store: _Identified | None

    def identity(self) -> IndexIdentity:
        """What this process builds: its embedder's provider, model and dims, and its chunker."""
        return IndexIdentity(self.embedder.provider, self.embedder.model, self.embedder.dims, self._chunker())

    def _chunker(self) -> str:
        return chunker_id(self.chunking)

    @property
    def foreign(self) -> bool:
        """The open index was built with another provider, model, dims or chunker: read-only here."""
        if self.store is None:
            return False
        return not self.same_model() or self.store.identity.chunker != self._chunker()

    def same_model(self) -> bool:
        """The open index was built with this embedder's provider, model and dims."""
        have = self.store.identity if self.store is not None else None
        return (  # in this order: ``dims`` may load the model, so it is asked last
            have is not None
            and have.provider == self.embedder.provider
            and have.model == self.embedder.model
            and have.dims == self.embedder.dims
        )

    def vector_dims(self) -> int:
        """Dims to search with: the index's when its vectors are of this embedder's model, else 0."""
        return self.store.identity.dims if self.store is not None and self.same_model() else 0

    def mismatch_note(self) -> str | None:
        """Why the open index is read as it is, and the command that rebuilds it (None: it matches)."""
        if not self.foreign or self.store is None:
            return None
        return mismatch_message(self.store.identity, self.identity())

    def _replaces(self, replace: Replace) -> bool:
        """A sync with ``replace`` rebuilds the open foreign index."""
        if not self.foreign or replace == "none":
            return False
        return replace == "any" or self.same_model()

    # -- embedding what is pending (the same loop for both engines) ----------------------------------------
    def embed_step(
        self,
        *,
        write_lock: contextlib.AbstractContextManager[object] | None = None,
        cancel: pending.Cancel | None = None,
        pause: Callable[[], None] | None = None,
    ) -> pending.StepResult | None:
        """Embed and commit one batch of pending chunks (the engine's)."""
        raise NotImplementedError

    def _count_pending(self, report: SyncReport) -> None:
        """Set ``report.chunks_pending`` from the open index (the engine's)."""
        raise NotImplementedError

    def embed_pending(
        self, report: SyncReport, progress: Progress | None = None, cancel: threading.Event | None = None
    ) -> None:
        """Embed every pending chunk in this thread, batch after committed batch (the caller holds the
        writer's lock, if any); progress is (chunks with a vector, chunks, "embedding")."""
        while not (cancel is not None and cancel.is_set()):
            step = self.embed_step(cancel=cancel)
            if step is None:
                break
            report.chunks_embedded += step.embedded
            report.chunks_reused += step.filled - step.embedded
            if progress:
                progress(step.total - step.pending, step.total, "embedding")
            if step.filled == 0:
                break  # nothing could be written (cancelled, or the batch vanished): do not spin
        self._count_pending(report)
