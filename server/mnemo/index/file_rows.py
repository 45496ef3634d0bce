"""What one memory file becomes in an index, whatever the engine: its problem (unreadable, bad front
matter), its chunks, the chunk rows and the ``files`` row. The DuckDB indexer (:mod:`mnemo.index.indexer`)
and the PostgreSQL one (:mod:`mnemo.index.pg_sync`) write these, so both index the same text the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from mnemo.config import ChunkingSettings
from mnemo.index import file_meta
from mnemo.index.pending import Vectors
from mnemo.index.sources import SourceText
from mnemo.index.store import ChunkStore
from mnemo.index.writer_api import ChunkRow, ChunkSlot
from mnemo.markdown.chunker import Chunk, chunk_markdown
from mnemo.markdown.frontmatter import parse_front_matter
from mnemo.text.terms import terms_string
from mnemo.workspace.layout import FileKind, MemoryFile, not_a_date

log = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]
"""(files done, files total, current path)."""


Replace = Literal["none", "chunker", "any"]
"""Which foreign index a sync replaces (see the module's docstring)."""

VectorsWhen = Literal["now", "later"]
"""When a sync embeds the chunks it wrote without a vector: ``now`` (before it returns, after the
keyword side is committed) or ``later`` (someone else embeds them: :meth:`Indexer.embed_step`)."""


@dataclass
class SyncReport:
    files_seen: int = 0
    files_indexed: int = 0
    files_removed: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    rebuilt: bool = False
    seconds: float = 0.0
    files_stale: int = 0
    """Files changed on disk but not indexed: the open index was built for another model or chunker."""
    chunks_pending: int = 0
    """Chunks left without a vector when the sync returned (embedded later; searched by keyword)."""
    keyword_seconds: float = 0.0
    """When the keyword side was committed (searchable), seconds from the start."""
    problems: list[tuple[str, str]] = field(default_factory=list)


FileRow = tuple[str, str, str, str | None, str, float, int, int, str | None]
"""(path, kind, source, day, digest, mtime, size, chunks, problem): the arguments of ``upsert_file``."""


def embedding_input(chunk: Chunk) -> str:
    """What the model sees (and the keyword side tokenises): the heading path gives a chunk its context."""
    if chunk.heading_path:
        return " > ".join(chunk.heading_path) + "\n" + chunk.text
    return chunk.text


FUTURE_DAYS = 30
"""A note dated further ahead than this is named as a problem: it outranks every real note as the newest
(``memory/2062-11-01.md`` for 2026-11-01); a plan for the coming weeks is not."""


def file_problem(memory_file: MemoryFile, source: SourceText) -> str | None:
    """Why the file is indexed without (some of) its text or not as meant, or None: unreadable, bad front
    matter, named with a date that is none."""
    problem = source.problem
    misdated = not_a_date(memory_file.path)
    if misdated is not None:
        note = f"named with {misdated}, which is not a date: indexed as an undated note (no daily decay)"
        problem = "; ".join(filter(None, [problem, note]))
    if memory_file.day is not None and (memory_file.day - date.today()).days > FUTURE_DAYS:
        note = f"dated {memory_file.day.isoformat()}, in the future: it counts as the newest note (a typo?)"
        problem = "; ".join(filter(None, [problem, note]))
    if source.text is not None and memory_file.kind is not FileKind.SESSION:
        front_matter_problem = parse_front_matter(source.text).problem
        if front_matter_problem:
            problem = "; ".join(filter(None, [problem, f"front matter: {front_matter_problem}"]))
    return problem


def file_chunks(memory_file: MemoryFile, source: SourceText, chunking: ChunkingSettings) -> list[Chunk]:
    if source.text is None:
        return []
    return chunk_markdown(
        memory_file.path, source.text, target_tokens=chunking.target_tokens, overlap=chunking.overlap
    )


def split_kept(
    chunks: list[Chunk], existing: dict[str, ChunkSlot], *, keep_pending: bool
) -> tuple[list[tuple[int, Chunk]], list[Chunk]]:
    """(kept: (row id, chunk) already indexed, new: to write). ``existing`` keeps the slots no chunk
    claimed (to delete). A pending chunk (no vector yet) is rewritten unless ``keep_pending``."""
    kept: list[tuple[int, Chunk]] = []
    new: list[Chunk] = []
    for chunk in chunks:
        found = existing.pop(chunk.key, None)
        if found is not None and (found.has_vector or keep_pending):
            kept.append((found.id, chunk))
        else:
            if found is not None:
                existing[chunk.key] = found
            new.append(chunk)
    return kept, new


def chunk_rows(memory_file: MemoryFile, chunks: list[Chunk]) -> list[ChunkRow]:
    day = memory_file.day.isoformat() if memory_file.day else None
    return [
        ChunkRow(
            key=c.key,
            path=memory_file.path,
            source=memory_file.source,
            kind=memory_file.kind.value,
            day=day,
            start_line=c.start_line,
            end_line=c.end_line,
            heading=" > ".join(c.heading_path),
            text=c.text,
            terms=terms_string(embedding_input(c)),
            hash=c.content_hash,
        )
        for c in chunks
    ]


def file_row(
    memory_file: MemoryFile, source: SourceText, mtime: float, size: int, chunks: int, problem: str | None
) -> FileRow:
    day = memory_file.day.isoformat() if memory_file.day else None
    kind, src = memory_file.kind.value, memory_file.source
    return (memory_file.path, kind, src, day, source.digest, mtime, size, chunks, problem)


def write_file(
    store: ChunkStore,
    memory_file: MemoryFile,
    source: SourceText,
    stat: tuple[float, int],
    report: SyncReport,
    chunking: ChunkingSettings,
    vectors_for: Callable[[Sequence[Chunk]], Vectors | None],
    *,
    live: bool,
    embed: bool,
) -> None:
    """Write one file's chunks (``stat``: its mtime and size); ``vectors_for`` gives the new chunks'
    vectors (cached, embedded when ``embed``, else pending: a sync commits the keyword side first)."""
    problem = file_problem(memory_file, source)
    if problem:
        report.problems.append((memory_file.path, problem))
        log.warning("%s: %s", memory_file.path, problem)
    chunks = file_chunks(memory_file, source, chunking)
    existing = store.chunk_keys(memory_file.path) if live else {}
    # a pending chunk stays pending unless embedding now
    kept, new = split_kept(chunks, existing, keep_pending=store.identity.dims == 0 or not embed)
    vectors = vectors_for(new)
    rows = chunk_rows(memory_file, new)
    row = file_row(memory_file, source, *stat, len(chunks), problem)
    matrix, waiting = (vectors.matrix, vectors.pending) if vectors is not None else (None, [])
    meta = file_meta.extract(source.text, front_matter=memory_file.kind is not FileKind.SESSION)
    if not live:  # a building index: no old chunks; written in batches by flush_staged
        store.stage_file(rows, matrix, row, waiting, meta)
        report.files_indexed += 1
        return
    with store.transaction():
        store.delete_chunks([slot.id for slot in existing.values()])
        store.move_chunks([(cid, chunk.start_line, chunk.end_line) for cid, chunk in kept])
        store.insert_chunks(rows, matrix, live=live, pending=waiting)
        store.upsert_file(*row)
        store.write_meta(memory_file.path, meta)
    report.files_indexed += 1
    report.chunks_reused += len(kept)
