"""Consolidator: ``mnemo consolidate``, ``mnemo/consolidate`` and the consolidation code action.

Reads the memory files (an editor's unsaved buffers win over the disk), asks the index for chunks whose
vectors are near-duplicates (none in keyword mode, or when another process holds the index), clusters
the near-duplicate lines (:mod:`mnemo.editor.consolidation`) and proposes one line per cluster: merged by
the chat model when one is configured (and checked: one line, nothing invented), else the newest copy.
A :class:`Proposal` is a diff and editor edits for the user to review; :meth:`Consolidator.apply`
writes it only when asked, and only onto files still as they were when it was proposed.
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TYPE_CHECKING, Protocol

from mnemo.atomic_file import replace_text
from mnemo.config import Settings
from mnemo.editor import consolidation, hygiene
from mnemo.editor.consolidation import FileChange, MemoryLine, Merge
from mnemo.editor.memory_edits import TextEdit
from mnemo.editor.vcs import BlameCache
from mnemo.errors import MnemoError
from mnemo.index import racy
from mnemo.index.duckdb_native import duckdb
from mnemo.memory.service import MemoryService

if TYPE_CHECKING:  # the chat stack loads only when a model merges
    from mnemo.agent.providers.base import ChatProvider

log = logging.getLogger(__name__)

READ_WAIT_S = 1.0
CACHED_FILES = 4096
"""Files whose memory lines are remembered (by path, mtime and size): a code action re-reads only what
changed."""
MERGE_PROMPT = (
    "These lines are copies of one memory, oldest first. Write them as ONE line that keeps every fact "
    "they state, with the newest value where they disagree. Use only words from the lines. Answer with "
    "the line only, no list marker, no quotes, no explanation."
)


_FILES: dict[tuple[str, str, int, int], tuple[str, list[MemoryLine]]] = {}
"""Text and memory lines of files on disk by (workspace, path, mtime, size): read once until they change."""
_WORDS_ONLY: dict[str, tuple[object, Proposal]] = {}
"""Per workspace root, the last word-only proposal and the memory texts it was made from (code actions
build a consolidator per request)."""


class ConsolidationConflict(MnemoError):
    """A file changed between the proposal and its application (nothing was written)."""


class ConsolidationError(MnemoError):
    """A file of the proposal could not be written (it is unchanged; the message names those written)."""


class LineMerger(Protocol):
    def merge(self, lines: Sequence[str]) -> str:
        """One line from ``lines`` (oldest first)."""
        ...


class ChatMerger:
    """Merges each cluster with one short, deterministic chat request."""

    def __init__(self, provider: ChatProvider, max_tokens: int = 160) -> None:
        self.provider = provider
        self.max_tokens = max_tokens

    def merge(self, lines: Sequence[str]) -> str:
        from mnemo.agent.providers.base import ChatMessage

        listed = "\n".join(f"- {line}" for line in lines)
        stream = self.provider.stream(
            [ChatMessage("system", MERGE_PROMPT), ChatMessage("user", listed)],
            max_tokens=self.max_tokens,
            temperature=0.0,
        )
        for _delta in stream:
            pass
        return stream.text


@dataclass
class Proposal:
    merges: list[Merge]
    before: dict[str, str]
    """The text of every file a merge changes, as the proposal read it."""
    changes: dict[str, FileChange]
    model: str = ""
    """The chat model that merged (empty: the newest copy was kept)."""
    notes: list[str] = field(default_factory=list)

    def after(self, path: str) -> str:
        return consolidation.apply_change(self.before[path], self.changes[path])

    def diff(self) -> str:
        """A unified diff of every change, file by file."""
        out: list[str] = []
        for path in sorted(self.changes):
            old, new = self.before[path].splitlines(True), self.after(path).splitlines(True)
            out.extend(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}"))
        return "".join(line if line.endswith("\n") else line + "\n" for line in out)

    def edits(self) -> list[TextEdit]:
        return [
            e
            for path in sorted(self.changes)
            for e in consolidation.text_edits(path, self.before[path], self.changes[path])
        ]


class Consolidator:
    def __init__(
        self, memory: MemoryService, settings: Settings, merger: LineMerger | None = None, model: str = ""
    ) -> None:
        self.memory = memory
        self.settings = settings
        self.workspace = memory.workspace
        self.merger = merger
        self.model = model
        self._blame = BlameCache(self.workspace.root)

    def propose(
        self, buffers: dict[str, str] | None = None, *, use_model: bool = True, vectors: bool = True
    ) -> Proposal:
        """The clusters of the workspace's memory and one line for each (nothing is written);
        ``vectors``: also look into chunks the index finds near-duplicate."""
        texts, lines = self._read(buffers or {})
        notes: list[str] = []
        linked = self._linked(lines, notes) if vectors else []
        found = consolidation.clusters(lines, self.settings.memory.consolidate_threshold, linked)
        merger = self.merger if use_model else None
        merges = [self._merge(cluster, merger, set(buffers or ())) for cluster in found]
        changes = consolidation.changes(merges)
        return Proposal(
            merges,
            {path: texts[path] for path in changes},
            changes,
            self.model if merger is not None and found else "",
            notes,
        )

    def for_line(self, path: str, line: int, buffers: dict[str, str] | None = None) -> Proposal | None:
        """The proposal for the one cluster holding 1-based ``line`` of ``path`` (no model and words
        only: a code action must answer at once), or None when that line has no near-duplicate."""
        proposal = self._words_only(buffers or {})
        for merge in proposal.merges:
            if any(m.path == path and m.line == line for m in merge.lines):
                changes = consolidation.changes([merge])
                before = {p: proposal.before[p] for p in changes}
                return Proposal([merge], before, changes, "", proposal.notes)
        return None

    def _words_only(self, buffers: dict[str, str]) -> Proposal:
        """:meth:`propose` by words, no model, kept until a memory file's text changes: the editor asks
        for each line's code actions, and clustering every memory line again for each is wasted."""
        texts, lines = self._read(buffers)
        key = (self.settings.memory.consolidate_threshold, tuple(sorted(texts.items())))
        root = str(self.workspace.root)
        last = _WORDS_ONLY.get(root)
        if last is not None and last[0] == key:
            return last[1]
        found = consolidation.clusters(lines, self.settings.memory.consolidate_threshold, [])
        merges = [self._merge(cluster, None, set(buffers)) for cluster in found]
        changes = consolidation.changes(merges)
        proposal = Proposal(merges, {path: texts[path] for path in changes}, changes, "", [])
        _WORDS_ONLY[root] = (key, proposal)
        return proposal

    def apply(self, proposal: Proposal) -> list[str]:
        """Write the proposal's files; refused when one changed since (then nothing is written)."""
        for path, text in proposal.before.items():
            if self._disk_text(path) != text:
                raise ConsolidationConflict(f"{path} changed since the proposal; run it again")
        written: list[str] = []
        for path in sorted(proposal.changes):
            try:  # each file whole or not at all: a full disk or a crash never leaves half a MEMORY.md
                replace_text(self.workspace.root / path, proposal.after(path))
            except OSError as exc:
                done = f"; written before it: {', '.join(written)}" if written else "; nothing was written"
                raise ConsolidationError(f"cannot write {path} ({exc.strerror or exc}){done}") from exc
            written.append(path)
        return written

    # -- pieces -------------------------------------------------------------------------------------
    def _disk_text(self, path: str) -> str:
        return (self.workspace.root / path).read_bytes().decode("utf-8")

    def _read(self, buffers: dict[str, str]) -> tuple[dict[str, str], list[MemoryLine]]:
        """Every memory file's text (a buffer, else the disk) and memory lines."""
        texts: dict[str, str] = {}
        lines: list[MemoryLine] = []
        for memory_file, stat in sorted(self.workspace.scan(), key=lambda found: found[0].path):
            if memory_file.source != "memory":
                continue
            path = memory_file.path
            day = memory_file.day or date.fromtimestamp(stat.st_mtime)
            rank = consolidation.durability(path, memory_file.day is not None)
            if path in buffers:
                texts[path] = buffers[path]
                lines.extend(consolidation.memory_lines(path, buffers[path], day=day, rank=rank))
                continue
            key = (str(self.workspace.root), path, stat.st_mtime_ns, stat.st_size)
            cached = _FILES.get(key)
            if cached is None:
                read_at = time.time()
                try:
                    text = self._disk_text(path)
                except (OSError, UnicodeDecodeError) as exc:
                    log.info("consolidate: %s skipped (%s)", path, exc)
                    continue
                cached = (text, consolidation.memory_lines(path, text, day=day, rank=rank))
                if len(_FILES) >= CACHED_FILES:
                    _FILES.clear()
                if racy.settled(stat.st_mtime, read_at):  # else a same-size write in its tick goes unseen
                    _FILES[key] = cached
            texts[path] = cached[0]
            lines.extend(cached[1])
        return texts, lines

    def _committed_day(self, line: MemoryLine) -> MemoryLine:
        """A line of an undated file (MEMORY.md, a topic) dated by the commit that last changed it, when
        the workspace is a Git repository: the file's own date is its last change, any line's, and a
        fact untouched for months must not pass for today's (and beat a newer daily note's version).
        A line changed since the last commit keeps the file's date."""
        found = self._blame.line(line.path, line.line)
        if found is None or not found.date:
            return line
        return replace(line, day=date.fromisoformat(found.date[:10]))

    def _linked(
        self, lines: list[MemoryLine], notes: list[str]
    ) -> list[tuple[list[MemoryLine], list[MemoryLine]]]:
        """Lines of chunk pairs the index finds near-duplicate by their vectors."""
        try:
            self.memory.ensure_open()
            with self.memory.indexer.reading(timeout=READ_WAIT_S) as reader:
                chunks = [] if reader is None else reader.embedded_chunks("memory")
        except (MnemoError, duckdb.Error, OSError) as exc:  # another process holds the index: words only
            notes.append(f"compared by words only (index unavailable: {exc})")
            return []
        vectors = [
            hygiene.ChunkVector(c.path, c.start_line, c.end_line, c.heading, c.text, c.embedding)
            for c in chunks
            if c.embedding is not None
        ]
        by_path: dict[str, list[MemoryLine]] = {}
        for m in lines:
            by_path.setdefault(m.path, []).append(m)

        def inside(c: hygiene.ChunkVector) -> list[MemoryLine]:
            return [m for m in by_path.get(c.path, []) if c.start_line <= m.line <= c.end_line]

        threshold = self.settings.memory.duplicate_threshold
        return [(inside(a), inside(b)) for a, b, _ in hygiene.near_duplicate_pairs(vectors, threshold)]

    def _merge(self, cluster: list[MemoryLine], merger: LineMerger | None, buffered: set[str]) -> Merge:
        cluster = [self._committed_day(m) if m.rank and m.path not in buffered else m for m in cluster]
        keep, latest = consolidation.home(cluster), consolidation.newest(cluster)
        lines = tuple(cluster)
        if merger is None:
            return Merge(lines, keep, latest.body, "newest")
        oldest_first = sorted(cluster, key=lambda m: (m.day, m.rank, m.path, m.line))
        try:
            answer = consolidation.merged_body(merger.merge([m.body for m in oldest_first]))
        except MnemoError as exc:  # the model failed: keep the newest, say why
            return Merge(lines, keep, latest.body, "newest", f"the model failed: {exc}")
        problem = consolidation.check_merged(answer, cluster)
        if problem is not None:
            return Merge(lines, keep, latest.body, "newest", problem)
        return Merge(lines, keep, answer, "model")
