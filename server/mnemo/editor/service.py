"""EditorService: what the editor asks about memory files, answered by the core in one call each.

Hover insights and code lenses (index + Git blame, no model), hygiene diagnostics (text, plus vectors
already in the index), the edits behind code actions, and Git commit/history. Front ends (LSP, CLI)
only convert.
"""

from __future__ import annotations

import threading
from datetime import date

from mnemo.config import Settings
from mnemo.editor import hygiene, memory_edits
from mnemo.editor.insights import (
    ChunkLens,
    ChunkStats,
    LineInsight,
    chunk_lenses,
    file_chunk_stats,
    insight_from_stats,
)
from mnemo.editor.neighbours import IndexNeighbours, chunk_vector, comparable
from mnemo.editor.vcs import BlameCache, CommitResult, HistoryEntry, MemoryRepo
from mnemo.memory.service import MemoryService
from mnemo.server_malloc import release_freed_heap
from mnemo.workspace.layout import FileKind

STATS_CACHE_FILES = 256
DIAGNOSTICS_WAIT_S = 30.0
PASS_VECTORS = 50_000
"""Most chunk vectors a whole-workspace diagnostics pass compares (~14,000 notes). The pass grows with
their square: 13 s of CPU at 36,000, 24 s at 50,000 (docs/benchmarks.md). Past it, near-duplicates are
checked per opened or edited file."""
READ_WAIT_S = 1.0
"""How long a hover or lens waits for the index (a generation swap) before answering without it."""


class EditorService:
    def __init__(self, memory: MemoryService, settings: Settings, repo: MemoryRepo | None = None) -> None:
        """``repo``: Git for the memory files (the composition root's, :attr:`mnemo.services.Services.repo`)."""
        self.memory = memory
        self.settings = settings
        self.workspace = memory.workspace
        self.blame = BlameCache(self.workspace.root)
        self._blame_lock = threading.Lock()
        self.repo = repo or MemoryRepo(self.workspace, include_sessions=settings.memory.commit_sessions)
        self._stats_cache: dict[str, tuple[int, list[ChunkStats]]] = {}
        """Per file: (index generation, chunk statistics); a hover re-reads only after the index changed."""

    def is_memory_markdown(self, rel: str) -> bool:
        memory_file = self.workspace.classify(rel)
        return memory_file is not None and memory_file.kind is not FileKind.SESSION

    # -- hover and code lens -------------------------------------------------------------------------
    def insight(self, rel: str, line: int, *, today: date | None = None) -> LineInsight | None:
        """Everything known about 1-based ``line`` of a memory file (None for other files)."""
        if not self.is_memory_markdown(rel):
            return None
        with self._blame_lock:
            blamed = self.blame.line(rel, line)
        memory_file = self.workspace.classify(rel)
        file_day = memory_file.day if memory_file is not None else None
        self.memory.flush_retrievals(timeout_s=0.2)  # the searches of the last moments count
        generation = self.memory.generation
        cached = self._stats_cache.get(rel)
        if cached is None or cached[0] != generation:
            with self.memory.indexer.reading(timeout=READ_WAIT_S) as reader:
                if reader is None:
                    return LineInsight(rel, line, None, None, "", 0, None, None, 1.0, blamed)
                cached = (generation, file_chunk_stats(reader, rel))
            if len(self._stats_cache) > STATS_CACHE_FILES:
                self._stats_cache.clear()
            self._stats_cache[rel] = cached
        return insight_from_stats(
            cached[1], rel, line, self.settings.search, file_day=file_day, blame=blamed, today=today
        )

    def lenses(self, rel: str) -> list[ChunkLens]:
        if not self.settings.server.code_lens or not self.is_memory_markdown(rel):
            return []
        self.memory.flush_retrievals(timeout_s=0.2)
        with self.memory.indexer.reading(timeout=READ_WAIT_S) as reader:
            return [] if reader is None else chunk_lenses(reader, rel)

    # -- diagnostics ---------------------------------------------------------------------------------
    def known_files(self) -> set[str]:
        return {memory_file.path for memory_file, _ in self.workspace.scan()}

    def _vectors(self) -> hygiene.VectorSpace:
        """Every memory chunk's most similar chunk in another file, for a workspace pass; none past
        :data:`PASS_VECTORS` (a team's shared index: the all-pairs check would take minutes at each
        sync; a file is still checked when it is opened or edited, :meth:`diagnose`)."""
        with self.memory.indexer.reading(timeout=READ_WAIT_S) as reader:
            embedded = 0 if reader is None else reader.counts().embedded
        if not 0 < embedded <= PASS_VECTORS:  # keyword mode (no vectors): no near-duplicate check
            return hygiene.VectorSpace([])
        # The first pass loads the writer's caches: the index holds little of what they are read from,
        # before the pass's own work (the start's peak at 2,000 notes; docs/benchmarks.md).
        self.memory.load_caches(timeout_s=READ_WAIT_S)
        with self.memory.indexer.reading(timeout=READ_WAIT_S) as reader:
            pairs = [] if reader is None else reader.nearest_in_other_files("memory", comparable)
        if pairs:  # what the pass itself read
            self.memory.release_buffers(timeout_s=0)
        return hygiene.VectorSpace([(chunk_vector(a), chunk_vector(b), cosine) for a, b, cosine in pairs])

    def diagnose(
        self,
        rel: str,
        text: str,
        *,
        known: set[str] | None = None,
        vectors: hygiene.VectorSpace | None = None,
    ) -> list[hygiene.Problem]:
        """Hygiene problems of one memory file's text (the editor buffer or the disk). ``vectors``: a
        workspace pass's; without, the file's near-duplicates come from the index's nearest-neighbour
        search (:class:`mnemo.editor.neighbours.IndexNeighbours`), not from every chunk's vector."""
        if not self.is_memory_markdown(rel):
            return []
        known = self.known_files() if known is None else known
        if vectors is not None:
            return self._file_problems(rel, text, known, vectors)
        with self.memory.indexer.reading(timeout=READ_WAIT_S) as reader:
            neighbours = None if reader is None else IndexNeighbours(reader)
            return self._file_problems(rel, text, known, neighbours)

    def _file_problems(
        self, rel: str, text: str, known: set[str], vectors: hygiene.Neighbours | None
    ) -> list[hygiene.Problem]:
        return hygiene.file_problems(
            rel,
            text,
            known=known,
            budget_chars=self.settings.memory.injection_budget_chars,
            vectors=vectors,
            duplicate_threshold=self.settings.memory.duplicate_threshold,
        )

    def diagnose_buffer(self, rel: str, text: str) -> list[hygiene.Problem]:
        """:meth:`diagnose` after pending edits reach the index (so near-duplicates see this text)."""
        # Unconditional: taking the writer also waits for an apply already under way on the timer thread.
        # This runs on a worker thread, so waiting delays only these diagnostics, never the editor;
        # embedding a new file's chunks can take seconds on a busy CPU.
        self.memory.apply_pending(timeout_s=DIAGNOSTICS_WAIT_S)
        return self.diagnose(rel, text)

    def diagnose_workspace(self, buffers: dict[str, str] | None = None) -> dict[str, list[hygiene.Problem]]:
        """Problems of every memory file (open buffers win over the disk); files without any included."""
        buffers = buffers or {}
        known = self.known_files()
        vectors = self._vectors()
        out: dict[str, list[hygiene.Problem]] = {}
        for rel in sorted(known):
            if not self.is_memory_markdown(rel):
                continue
            text = buffers.get(rel)
            if text is None:
                try:
                    text = (self.workspace.root / rel).read_text(encoding="utf-8-sig", errors="replace")
                except OSError:
                    continue
            out[rel] = self.diagnose(rel, text, known=known, vectors=vectors)
        release_freed_heap()  # what the pass freed: glibc keeps it otherwise (~20 MB at 2,000 notes)
        return out

    # -- edits behind code actions -------------------------------------------------------------------
    def memory_file_text(self, buffers: dict[str, str] | None = None) -> tuple[str, str]:
        """(path, text) of MEMORY.md, the editor's buffer when open; empty text when missing."""
        buffers = buffers or {}
        for name in hygiene.MEMORY_FILES:
            if name in buffers:
                return name, buffers[name]
            path = self.workspace.root / name
            if path.is_file():
                return name, path.read_text(encoding="utf-8-sig", errors="replace")
        return "MEMORY.md", ""

    def promotion_targets(self, rel: str, buffers: dict[str, str] | None = None) -> list[str]:
        """``##`` sections of MEMORY.md a line of ``rel`` may be promoted to (only from dated notes)."""
        memory_file = self.workspace.classify(rel)
        if memory_file is None or memory_file.kind not in (FileKind.DAILY, FileKind.SNAPSHOT):
            return []
        _, text = self.memory_file_text(buffers)
        return [s.title for s in memory_edits.sections(text)] or [""]

    def promote(
        self, text: str, first_line: int, last_line: int, section: str, buffers: dict[str, str] | None = None
    ) -> memory_edits.TextEdit:
        """The edit adding lines ``first_line..last_line`` (0-based) of ``text`` to ``## section``."""
        memory_path, memory_text = self.memory_file_text(buffers)
        lines = memory_edits.selected_lines(text, first_line, last_line)
        return memory_edits.promote_edit(memory_path, memory_text, section, lines)

    # -- Git -----------------------------------------------------------------------------------------
    def commit(
        self, *, message: str | None = None, force: bool = False, init_repo: bool = False
    ) -> CommitResult:
        return self.repo.commit(message=message, force=force, init_repo=init_repo)

    def history(self, rel: str, line: int | None = None) -> list[HistoryEntry]:
        self.workspace.resolve_memory_path(rel)  # raises WorkspacePathError for anything else
        return self.repo.history(rel, line)
