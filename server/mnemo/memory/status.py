"""The index's state as the service tracks it (:class:`IndexState`) and as it reports it
(:class:`IndexStatus`: ``mnemo status``, mnemo/status, the gateway's ``status``; serialised by mnemo.wire)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from mnemo.errors import IndexUnavailable
from mnemo.index.api import FileProblem

if TYPE_CHECKING:
    from mnemo.index.engine import IndexEngine
    from mnemo.index.indexer import SyncReport
    from mnemo.memory.background_vectors import PendingVectors

State = Literal["not indexed", "indexing", "ready", "error", "released"]
"""``released``: this process handed the index to another mnemo process (:mod:`mnemo.memory.sharing`)."""


@dataclass
class IndexState:
    """What the writer is doing, updated as a sync goes (the live side of :class:`IndexStatus`)."""

    state: State = "not indexed"
    done: int = 0
    total: int = 0
    current: str = ""
    message: str = ""
    last_report: SyncReport | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class SyncProgress:
    done: int
    total: int
    current: str
    """The file being indexed."""


@dataclass(frozen=True)
class VectorProgress:
    embedded: int
    """Chunks with a vector."""
    chunks: int
    embedding: bool
    """The background embedding thread is working."""


@dataclass(frozen=True)
class IndexStatus:
    workspace: str
    index: str
    """The index file."""
    state: State
    progress: SyncProgress
    message: str
    """Why, for ``error``; the model mismatch note when the index was built for another model."""
    files: int
    chunks: int
    provider: str
    """The configured embedding provider."""
    model: str
    """The model the open index was built with ('' when none is open)."""
    dims: int
    mode: Literal["hybrid", "keyword"]
    vectors: VectorProgress
    notes: list[str] = field(default_factory=list)
    config_problems: list[str] = field(default_factory=list)
    file_problems: list[FileProblem] = field(default_factory=list)
    writer: str | None = None
    """With index sharing: ``this process`` or ``another process`` writes the index."""
    role: str | None = None
    """With index sharing: this process's role (``editor``, ``gateway``)."""

    def shared(self, writer: str, role: str) -> IndexStatus:
        """This status as seen by a process that shares the index (:mod:`mnemo.memory.sharing`)."""
        return replace(self, writer=writer, role=role)


def read_status(
    indexer: IndexEngine,
    vectors: PendingVectors,
    state: IndexState,
    *,
    workspace: str,
    provider: str,
    wanted: bool,
    config_problems: list[str],
) -> IndexStatus:
    """The writer's status: ``state`` and the open index's counts, model and problems. ``wanted``: the
    embedder makes vectors (the mode when no index is open); ``provider``: the configured one."""
    counts = {"files": 0, "chunks": 0}
    file_problems = list(state.problems)
    with indexer.reading() as reader:
        built = reader.identity if reader is not None else None
        if reader is not None:
            found = reader.counts()
            # Problems of every indexed file, not only those (re)read by the last sync.
            file_problems = [(p.path, p.problem) for p in reader.file_problems()]
            counts = {"files": found.files, "chunks": found.chunks}
        hybrid = indexer.vector_dims() > 0 if built is not None else wanted
        mismatch = indexer.mismatch_note()
        embedded, total = vectors.counts(reader) if reader is not None and hybrid else (0, 0)
    notes = [mismatch] if mismatch else []
    if embedded < total:
        notes.append(vectors.note(embedded, total))
    return IndexStatus(
        workspace,
        str(indexer.path),
        state.state,
        SyncProgress(state.done, state.total, state.current),
        state.message,
        counts["files"],
        counts["chunks"],
        provider,
        built.model if built is not None else "",
        built.dims if built is not None else 0,
        "hybrid" if hybrid else "keyword",
        VectorProgress(embedded, total, vectors.busy()),
        notes,
        config_problems,
        [FileProblem(p, m) for p, m in file_problems],
    )


def not_built(state: IndexState) -> IndexUnavailable:
    """What a search answers while no index exists (the first build is running, or none was made)."""
    done = f" ({state.done}/{state.total} files)" if state.total else ""
    return IndexUnavailable(
        f"the index is not built yet{done}; run `mnemo index` or wait for the server to finish indexing"
    )
