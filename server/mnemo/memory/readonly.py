"""ReadOnlyMemory: one search, status or get from a process that does not write the index (`mnemo search`
with no server running) and exits after it.

It loads only what the call needs: the index opened read-only (:class:`mnemo.index.snapshot.Snapshot`:
no vss extension, no BM25 postings in memory, nothing written), the embedding model only when the query
is compared with vectors, and none of the writer's machinery (indexer, chunk store, embedding thread).
Results are the same as :class:`mnemo.memory.service.MemoryService`'s: the same searcher ranks the
same rows. What it cannot do, it leaves to the writer's path by raising :class:`WriterNeeded`: no index
yet, crash damage, files changed on disk since they were indexed (a search syncs first), or an index
built with another model or chunker (the writer says which command rebuilds it).

A one-shot search is not counted in the retrieval statistics (hovers, code lenses): recording them is
a write. Searches through a server (the editor's, the gateway's, ``mnemo serve --daemon``) are.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from mnemo.config import ConfigProblem, Settings
from mnemo.index import INDEX_FILE
from mnemo.memory.limits import check_search
from mnemo.memory.notes import KEYWORD_ONLY_NOTE, vectors_note
from mnemo.workspace.layout import Workspace

if TYPE_CHECKING:  # imported by the calls that open the index: a command a server answers loads none
    from mnemo.embeddings import Embedder
    from mnemo.index.api import IndexIdentity
    from mnemo.index.snapshot import Snapshot
    from mnemo.memory.reading import FileLines
    from mnemo.memory.status import IndexStatus
    from mnemo.search.results import SearchOutcome

EmbedderFor: TypeAlias = "Callable[[IndexIdentity | None], Embedder]"
"""Builds the configured embedder (nothing loaded); given the index's identity for ``provider = auto``."""


@dataclass(frozen=True)
class UpToDate:
    """An index with nothing to do: how many files it holds and those indexed with a problem."""

    files: int
    problems: list[tuple[str, str]]


class WriterNeeded(Exception):
    """This call needs the index writer's path (a sync, a repair or a rebuild first); the reason says why."""


class ReadOnlyMemory:
    def __init__(
        self,
        workspace: Workspace,
        settings: Settings,
        embedder_for: EmbedderFor,
        config_problems: Sequence[ConfigProblem] = (),
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.embedder_for = embedder_for
        self.config_problems = list(config_problems)
        self.path: Path = workspace.root / settings.index.dir / INDEX_FILE

    def _open(self) -> tuple[Snapshot, Embedder]:
        """The snapshot and this workspace's embedder when the index is complete and of this model and
        chunker; raises WriterNeeded otherwise."""
        from mnemo.index.identity import chunker_id
        from mnemo.index.snapshot import Snapshot

        if self.settings.index.backend != "duckdb":
            raise WriterNeeded(f"the index is in {self.settings.index.backend}, not a local file")
        snapshot = Snapshot.open(self.path)
        if snapshot is None:
            raise WriterNeeded("no complete, cleanly closed index")
        try:
            embedder = self.embedder_for(snapshot.identity)
            have = snapshot.identity
            # In this order: ``model`` may hash the model file; ``dims`` is never asked (it loads it).
            if (
                have.provider != embedder.provider
                or have.chunker != chunker_id(self.settings.chunking)
                or have.model != embedder.model
            ):
                raise WriterNeeded("the index was built with another model or chunker")
        except BaseException:
            snapshot.close()
            raise
        return snapshot, embedder

    def _changed_on_disk(self, snapshot: Snapshot, *, settle: bool = False) -> str | None:
        """Why the writer must sync first, or None: a file added, changed or removed on disk since it was
        indexed (a stat each; the content of one indexed within its mtime's tick: :mod:`mnemo.index.racy`);
        with ``settle``, also such a file now old enough to be recorded by its mtime."""
        from mnemo.index.racy import settled_since, stale_paths

        recorded, on_disk = snapshot.file_stamps(), self.workspace.stamps()
        if recorded == on_disk:
            return None
        root, max_bytes = self.workspace.root, self.settings.index.max_file_bytes
        if stale_paths(recorded, on_disk, snapshot.file_digests, root, max_bytes):
            return "files changed since they were indexed"
        if settle and settled_since(recorded, on_disk, time.time()):
            return "files indexed within their mtime's tick can be recorded by it now"
        return None

    def search(
        self,
        query: str,
        *,
        max_results: int | None = None,
        min_score: float | None = None,
        sources: Sequence[str] | None = None,
        today: date | None = None,
        filters: object = None,
        sync: bool = True,
        one_per_file: bool | None = None,
    ) -> SearchOutcome:
        """As :meth:`MemoryService.search`; ``sync``: raise WriterNeeded when a file changed since it was
        indexed (the writer's search syncs first), else search the index as it is."""
        from mnemo.embeddings import uses_bundled_english_model
        from mnemo.search.filters import check_filters
        from mnemo.search.hybrid import HybridSearcher

        query, max_results, notes = check_search(
            query, max_results, sources, self.settings.search.max_query_chars
        )
        checked = check_filters(filters)
        snapshot, embedder = self._open()
        try:
            if sync and (reason := self._changed_on_disk(snapshot)):
                raise WriterNeeded(reason)
            reader = snapshot.reader()
            dims = snapshot.identity.dims
            if dims > 0:
                counts = reader.counts()
                if counts.pending:
                    notes.append(vectors_note(counts.embedded, counts.chunks, embedding=False))
                if counts.embedded == 0:  # nothing to compare a query vector with yet
                    dims = 0
            wanted = self.settings.search  # one_per_file: as MemoryService.search; the usefulness prior too
            if one_per_file is not None:
                wanted = dataclasses.replace(wanted, one_per_file=one_per_file)
            searcher = HybridSearcher(
                embedder,
                wanted,
                english_only_vectors=uses_bundled_english_model(self.settings.embedding),
            )
            outcome = searcher.search_with_prior(
                reader,
                query,
                k=max_results or wanted.max_results,
                dims=dims,
                min_score=min_score,
                sources=sources,
                today=today,
                filters=checked,
            )
        finally:
            snapshot.close()
        outcome.notes.extend(notes)
        if snapshot.identity.dims == 0:
            outcome.notes.append(KEYWORD_ONLY_NOTE)
        return outcome

    def unchanged(self) -> UpToDate:
        """What `mnemo index` finds when there is nothing to do: every file on disk as it was indexed,
        every chunk with its vector, the index of this model and chunker. Raises WriterNeeded when a
        sync has work (the writer's path does it), so a no-op re-index opens nothing for writing and
        loads no indexer."""
        snapshot, _ = self._open()
        try:
            if reason := self._changed_on_disk(snapshot, settle=True):
                raise WriterNeeded(reason)
            reader = snapshot.reader()
            counts = reader.counts()
            if snapshot.identity.dims > 0 and counts.pending:
                raise WriterNeeded(f"{counts.pending:,} chunk(s) wait for vectors")
            problems = reader.file_problems()
        finally:
            snapshot.close()
        return UpToDate(counts.files, [(p.path, p.problem) for p in problems])

    def status(self) -> IndexStatus:
        """As :meth:`MemoryService.status` for an index no process is writing."""
        from mnemo.memory.status import IndexStatus, SyncProgress, VectorProgress

        snapshot, _ = self._open()
        try:
            reader = snapshot.reader()
            counts = reader.counts()
            problems = reader.file_problems()
        finally:
            snapshot.close()
        built = snapshot.identity
        vectors = built.dims > 0
        embedded, total = (counts.embedded, counts.chunks) if vectors else (0, 0)
        notes = [vectors_note(embedded, total, embedding=False)] if embedded < total else []
        return IndexStatus(
            str(self.workspace.root),
            str(self.path),
            "ready",
            SyncProgress(0, 0, ""),
            "",
            counts.files,
            counts.chunks,
            self.settings.embedding.provider,
            built.model,
            built.dims,
            "hybrid" if vectors else "keyword",
            VectorProgress(embedded, total, False),
            notes,
            [str(p) for p in self.config_problems],
            list(problems),
        )

    def get(self, path: str, from_line: int | None = None, lines: int | None = None) -> FileLines:
        """Lines of a memory file from disk (no index needed)."""
        from mnemo.memory.reading import read_lines

        return read_lines(self.workspace, {}, path, from_line, lines)
