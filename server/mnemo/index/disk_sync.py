"""One sync pass of a DuckDB index: the disk's files compared with what a store recorded of them, and
what changed written (for :class:`mnemo.index.indexer.Indexer`).

An unchanged workspace (a sync at every save, at every search through a daemon) costs the stat of each
file and a lookup: the files' states are kept by the store, and a file is classified (a MemoryFile made)
only when it is read. A file read within its mtime's tick is recorded unsettled and compared by content
next time (:mod:`mnemo.index.racy`). Files whose content did not change get their new stamps, and
removed files are deleted, in one transaction at the end. A sync that finds many files changed (a pull,
a checkout) commits them :data:`LIVE_BATCH_FILES` a transaction, the BM25 tables updated once for each
(one file a transaction: 300 changed notes took ~10 s of CPU).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mnemo.errors import SearchCancelled
from mnemo.index import file_meta, racy
from mnemo.index.file_rows import Progress, SyncReport
from mnemo.index.sources import SourceText, read_memory_file
from mnemo.index.store import ChunkStore
from mnemo.index.writer_api import FileState
from mnemo.workspace.layout import FileKind, MemoryFile, Workspace

LIVE_BATCH_FILES = 64
"""Changed files a sync of a live index commits in one transaction."""

IndexSource = Callable[[ChunkStore, MemoryFile, SourceText, float, int, SyncReport], None]
"""Writes one file's chunks into a store (its mtime and size as recorded)."""


def count_stale(store: ChunkStore, workspace: Workspace, max_bytes: int) -> int:
    """Files added, changed or removed on disk since ``store`` indexed them (a stat each)."""
    known = store.file_states()
    recorded = {path: (state.mtime, state.size) for path, state in known.items()}

    def digests(paths: Iterable[str]) -> dict[str, str]:
        return {path: known[path].digest for path in paths}

    return len(racy.stale_paths(recorded, workspace.stamps(), digests, workspace.root, max_bytes))


@dataclass
class DiskSync:
    """Brings ``store`` up to date with ``workspace``'s files; ``live``: an index searched meanwhile
    (else a building one, written in staged batches)."""

    store: ChunkStore
    workspace: Workspace
    max_bytes: int
    index_source: IndexSource
    live: bool
    touched: list[tuple[str, float, int]] = field(default_factory=list)
    """Files with the same content and a new mtime or size: written at the end."""

    def run(self, report: SyncReport, progress: Progress | None, cancel: threading.Event | None) -> None:
        store = self.store
        known = store.file_states()
        on_disk = self.workspace.stamps()
        report.files_seen = len(on_disk)
        with_meta = store.meta_paths() if self.live else frozenset()
        to_read = [
            (done, path, stamp)
            for done, (path, stamp) in enumerate(on_disk.items())
            if path not in known
            or (known[path].mtime, known[path].size) != stamp
            or (self.live and path not in with_meta)
        ]
        for first in range(0, len(to_read), LIVE_BATCH_FILES):
            with store.batched() if self.live else contextlib.nullcontext():  # (a build stages)
                for done, path, stamp in to_read[first : first + LIVE_BATCH_FILES]:
                    if cancel is not None and cancel.is_set():
                        raise SearchCancelled("indexing cancelled")
                    if progress:
                        progress(done, len(on_disk), path)
                    self._file(path, stamp, known.get(path), path in with_meta, report)
        store.flush_staged()
        gone = sorted(known.keys() - on_disk.keys())
        if self.touched or gone:  # one transaction, not one a file (2,000 touched files: 2.8 s before)
            with store.transaction():
                store.touch_files(self.touched)
                for path in gone:
                    store.delete_file(path)
            report.files_removed += len(gone)
        if progress:
            progress(len(on_disk), len(on_disk), "")

    def _file(
        self, path: str, stamp: tuple[float, int], state: FileState | None, has_meta: bool, report: SyncReport
    ) -> None:
        """One file whose stamp differs from ``state`` (or without a ``file_meta`` row)."""
        memory_file = self.workspace.classify(path)
        if memory_file is None:  # (stamps() keeps only the paths classify() answers for)
            return
        if state is not None and (state.mtime, state.size) == stamp:
            self.fill_meta(memory_file)  # indexed before the file_meta table existed
            return
        read_at = time.time()
        source = read_memory_file(self.workspace.root / path, memory_file.kind, self.max_bytes)
        mtime, size = racy.recorded_mtime(stamp[0], read_at), stamp[1]  # a write in its tick is not missed
        if state is not None and state.digest == source.digest and source.text is not None:
            if (state.mtime, state.size) != (mtime, size):
                self.touched.append((path, mtime, size))
            if self.live and not has_meta:
                self.fill_meta(memory_file, source)
            return
        self.index_source(self.store, memory_file, source, mtime, size, report)

    def fill_meta(self, memory_file: MemoryFile, source: SourceText | None = None) -> None:
        """Write the ``file_meta`` row of a file whose chunks are current (read once, after an upgrade)."""
        if source is None:
            source = read_memory_file(
                self.workspace.root / memory_file.path, memory_file.kind, self.max_bytes
            )
        meta = file_meta.extract(source.text, front_matter=memory_file.kind is not FileKind.SESSION)
        with self.store.transaction():
            self.store.write_meta(memory_file.path, meta)
