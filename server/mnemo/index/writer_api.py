"""What the indexer needs from an index engine to write it: :class:`IndexWriter` and the rows it takes
(the reader's side and the rules both keep: :mod:`mnemo.index.api`). It imports no engine."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mnemo.index.api import FileProblem, IndexCounts, IndexIdentity

if TYPE_CHECKING:  # annotations only
    import numpy as np


# -- rows ------------------------------------------------------------------------------------------
@dataclass
class ChunkRow:
    """A chunk to insert (:meth:`IndexWriter.insert_chunks`); ``terms``: our tokenizer's terms of what
    the model embeds (heading path and text), whitespace-separated; ``hash``: the chunk's content hash."""

    key: str
    path: str
    source: str
    kind: str
    day: str | None
    start_line: int
    end_line: int
    heading: str
    text: str
    terms: str
    hash: str


@dataclass(frozen=True)
class FileMeta:
    """A file's front matter as search filters use it."""

    tags: tuple[str, ...] = ()
    project: str | None = None
    type: str | None = None
    day: str | None = None
    """ISO date from the front matter's ``date``, when it is a valid one."""


@dataclass(frozen=True)
class PendingChunk:
    """A chunk committed without a vector, waiting for the model."""

    id: int
    key: str
    input: str
    """What the model sees (:func:`mnemo.index.indexer.embedding_input`: heading path, newline, text)."""

    @property
    def digest(self) -> str:
        import hashlib  # (OpenSSL's library: not loaded by a process that only reads)

        return hashlib.sha256(self.input.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FileState:
    """What the indexer compares with the disk to skip unchanged files."""

    digest: str
    mtime: float
    size: int


@dataclass(frozen=True)
class ChunkSlot:
    """A chunk already indexed for a file: its id and whether it has a vector yet."""

    id: int
    has_vector: bool


# -- the writer ------------------------------------------------------------------------------------
class IndexWriter(Protocol):
    """The single writer's view of an index (what :class:`mnemo.index.indexer.Indexer` and
    :mod:`mnemo.index.pending` call). Writes happen inside :meth:`transaction`; a crash leaves every
    file either old or new. Several writer processes may share one engine (PostgreSQL) as long as each
    file's upsert is one transaction keyed by content hash."""

    @property
    def identity(self) -> IndexIdentity: ...

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """Commit on exit, roll back on an exception."""
        ...

    # files
    def file_states(self) -> Mapping[str, FileState]:
        """Every indexed file's content digest, mtime and size, by path."""
        ...

    def file_problems(self) -> list[FileProblem]: ...

    def chunk_keys(self, path: str) -> dict[str, ChunkSlot]:
        """The current chunks of ``path`` by key."""
        ...

    def upsert_file(
        self,
        path: str,
        kind: str,
        source: str,
        day: str | None,
        digest: str,
        mtime: float,
        size: int,
        chunks: int,
        problem: str | None,
    ) -> None:
        """Replace the ``files`` row of ``path``."""
        ...

    def touch_files(self, stamps: Sequence[tuple[str, float, int]]) -> None:
        """Files whose content is unchanged got new mtimes and sizes: ``(path, mtime, size)`` each."""
        ...

    def delete_file(self, path: str) -> None:
        """Forget ``path``: its chunks, their keyword postings, its files and metadata rows."""
        ...

    def delete_chunks(self, ids: Sequence[int]) -> None: ...

    def move_chunks(self, moves: Sequence[tuple[int, int, int]]) -> None:
        """New line ranges ``(chunk id, start, end)`` of kept chunks."""
        ...

    def insert_chunks(
        self,
        rows: Sequence[ChunkRow],
        vectors: np.ndarray | None,
        *,
        live: bool,
        pending: Sequence[bool] = (),
    ) -> None:
        """Add chunks with vectors (rows marked ``pending`` get none yet); ``live``: searchable by
        keyword at commit (a building index indexes keywords once at the end)."""
        ...

    def write_meta(self, path: str, meta: FileMeta) -> None:
        """Replace the front-matter row (tags, project, type, date) of ``path``."""
        ...

    def meta_paths(self) -> Set[str]:
        """Paths that have a metadata row."""
        ...

    # embedding cache: (provider, model, sha256 of the embedded text) -> vector, every model's kept
    def cached_embeddings(self, hashes: Sequence[str]) -> dict[str, np.ndarray]: ...

    def cache_embeddings(self, items: dict[str, np.ndarray]) -> None: ...

    # pending vectors (chunks committed with their keyword side only)
    def pending_batch(self, limit: int) -> list[PendingChunk]:
        """Up to ``limit`` chunks without a vector, most useful first (:data:`mnemo.index.pending.PRIORITY`)."""
        ...

    def fill_vectors(self, chunks: Sequence[PendingChunk], vectors: np.ndarray) -> int:
        """Give still-pending ``chunks`` (same id and key) their vectors; returns how many."""
        ...

    def counts(self) -> IndexCounts: ...

    # retrieval statistics (history, not cache)
    def record_retrievals(self, rows: Sequence[tuple[object, ...]]) -> None:
        """Append search results, each ``(chunk_key, path, start_line, end_line, query, searched_at,
        vector, text, decay, weight, score, rank)`` (:func:`mnemo.memory.retrievals.rows_for`); read
        back by :meth:`IndexReader.chunk_stats`."""
        ...


__all__ = ["ChunkRow", "ChunkSlot", "FileMeta", "FileState", "IndexWriter", "PendingChunk"]
