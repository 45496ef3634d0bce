"""IdentityMatch: how an engine's indexer (:class:`mnemo.index.indexer.Indexer`,
:class:`mnemo.index.pg_indexer.PgIndexer`) compares the open index with what this process would build:
foreign (read-only here), same model (its vectors are searchable), the note that says why, and whether a
sync replaces it. One definition, so both engines decide alike."""

from __future__ import annotations

from typing import Protocol

from mnemo.config import ChunkingSettings
from mnemo.embeddings import Embedder
from mnemo.index.api import IndexIdentity
from mnemo.index.file_rows import Replace
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
