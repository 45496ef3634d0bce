"""What one machine writes to the shared PostgreSQL index: the files that changed on its own disk.

Every machine indexes its own checkout of the shared repository, and checkouts differ in mtimes and,
between two pulls, in content. So the database keeps content hashes (the truth of what is indexed) and
each machine keeps its own stat cache (``<index dir>/pg-<hash>.json``: path -> mtime, size,
digest as last seen *on this disk*, for one generation):

- a file unchanged on this disk since this machine last saw it is not read again, even when the
  database holds another machine's newer version of it (that machine has pulled; this one has not);
- a changed file is read and hashed; when the database already has that content (another machine
  indexed the same commit) nothing is written;
- a file removed from this disk is deleted from the database only when the database still holds the
  version this machine saw (a newer one written elsewhere is left alone);
- a file this machine never had (added elsewhere, not pulled yet) is left alone.

The cache is tied to the live generation's id: after a rebuild (here or on another machine) it starts
empty, and every file is read and compared with the database again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from mnemo.index import file_meta, racy
from mnemo.index.file_rows import chunk_rows, embedding_input, file_problem
from mnemo.index.sources import SourceText
from mnemo.index.writer_api import ChunkRow, FileMeta
from mnemo.markdown.chunker import chunk_markdown
from mnemo.workspace.layout import FileKind, MemoryFile, Workspace


@dataclass(frozen=True)
class Seen:
    mtime: float
    size: int
    digest: str


class StatCache:
    """This machine's view of its own files, for one generation of one namespace."""

    def __init__(self, path: Path, generation: int) -> None:
        self.path = path
        self.generation = generation
        self.files: dict[str, Seen] = {}
        self._dirty = False
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("generation") == generation:
                self.files = {p: Seen(float(m), int(s), str(d)) for p, (m, s, d) in data["files"].items()}

    def unchanged(self, rel: str, stat: os.stat_result) -> bool:
        seen = self.files.get(rel)
        return seen is not None and seen.mtime == stat.st_mtime and seen.size == stat.st_size

    def saw(self, rel: str, mtime: float, size: int, digest: str) -> None:
        self.files[rel] = Seen(mtime, size, digest)
        self._dirty = True

    def forget(self, rel: str) -> None:
        if self.files.pop(rel, None) is not None:
            self._dirty = True

    def count_changed(self, workspace: Workspace, max_bytes: int) -> int:
        """Files added, changed or removed on this disk since this machine last saw them (a file seen
        within its mtime's tick is compared by content: :mod:`mnemo.index.racy`)."""
        seen = {rel: (s.mtime, s.size) for rel, s in self.files.items()}
        on_disk = {mf.path: (stat.st_mtime, stat.st_size) for mf, stat in workspace.scan()}
        digests = {rel: s.digest for rel, s in self.files.items()}
        return len(racy.stale_paths(seen, on_disk, lambda _: digests, workspace.root, max_bytes))

    def save(self) -> None:
        """Write the cache atomically (a lost cache only means files are read and compared again)."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        data = {
            "generation": self.generation,
            "files": {p: [s.mtime, s.size, s.digest] for p, s in self.files.items()},
        }
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.path)
        self._dirty = False


def cache_path(index_dir: Path, namespace: str, database: str) -> Path:
    """This machine's stat cache for ``namespace`` in ``database`` (host, port and name: never a password)."""
    digest = hashlib.sha256(f"{database}\n{namespace}".encode()).hexdigest()[:12]
    return index_dir / f"pg-{digest}.json"


@dataclass(frozen=True)
class PreparedFile:
    """One file's chunks and metadata, ready to be written (vectors are looked up afterwards)."""

    memory_file: MemoryFile
    source: SourceText
    problem: str | None
    rows: list[ChunkRow]
    inputs: list[str]
    """What the model embeds for each row (heading path and text)."""
    meta: FileMeta


def prepare(memory_file: MemoryFile, source: SourceText, target_tokens: int, overlap: float) -> PreparedFile:
    """Chunk a file's text into rows (the same chunks, keys and terms as the DuckDB engine)."""
    problem = file_problem(memory_file, source)
    chunks = (
        []
        if source.text is None
        else chunk_markdown(memory_file.path, source.text, target_tokens=target_tokens, overlap=overlap)
    )
    rows = chunk_rows(memory_file, chunks)
    inputs = [embedding_input(c) for c in chunks]
    meta = file_meta.extract(source.text, front_matter=memory_file.kind is not FileKind.SESSION)
    return PreparedFile(
        memory_file, source, problem, rows, inputs, FileMeta(meta.tags, meta.project, meta.type, meta.day)
    )
