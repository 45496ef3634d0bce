"""Editor buffers waiting for the index writer: queued without blocking, applied after a debounce.

The text of a buffer open in the editor wins over the file on disk until it is saved or closed: a sync
re-applies it, ``get`` reads it, and a repair queues it again (:func:`apply_edits`, under the
service's writer lock).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from mnemo.workspace.layout import Workspace

if TYPE_CHECKING:
    from mnemo.index.engine import IndexEngine
    from mnemo.memory.background_vectors import PendingVectors


class EditorBuffers:
    """The edits not yet indexed (``None``: re-read the file) and the open buffers' texts."""

    def __init__(self, on_due: Callable[[], None]) -> None:
        self.on_due = on_due
        """Called on a timer thread when the debounce after the last edit has passed."""
        self._pending: dict[str, str | None] = {}
        self._open: dict[str, str] = {}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._applying = False
        self._closed = False

    def schedule(self, rel_path: str, text: str | None, delay_s: float) -> None:
        """Queue a buffer's text (None: closed or saved, read the disk) and restart the debounce."""
        with self._lock:
            if self._closed:
                return
            self._pending[rel_path] = text
            if text is None:
                self._open.pop(rel_path, None)
            else:
                self._open[rel_path] = text
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(delay_s, self.on_due)
            self._timer.daemon = True
            self._timer.start()

    def has_pending(self) -> bool:
        """Edits not yet in the index: queued, or taken by a writer that is still applying them."""
        with self._lock:
            return bool(self._pending) or self._applying

    @contextlib.contextmanager
    def taking(self) -> Iterator[dict[str, str | None]]:
        """The queued edits, taken for applying (:meth:`has_pending` stays true until they are done)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            self._applying = bool(pending)
        try:
            yield pending
        finally:
            with self._lock:
                self._applying = False

    def put_back(self, pending: dict[str, str | None]) -> None:
        """Edits taken but not applied (no index open yet); newer ones queued meanwhile win."""
        with self._lock:
            self._pending = {**pending, **self._pending}

    def requeue_open(self) -> None:
        """Queue every open buffer again (a repaired index lost what a failed write had taken)."""
        with self._lock:
            for rel, text in self._open.items():
                self._pending.setdefault(rel, text)

    def open_texts(self) -> dict[str, str]:
        """A copy of the open buffers' texts, by workspace path."""
        with self._lock:
            return dict(self._open)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()


def apply_edits(
    indexer: IndexEngine,
    workspace: Workspace,
    edits: Mapping[str, str | None],
    vectors: PendingVectors,
    open_texts: Mapping[str, str] | None = None,
) -> None:
    """Index taken-over edits (the caller holds the writer lock): a buffer's text as it is; ``None``: the
    file as on disk (one sync for all of them: only files whose size or mtime changed are read), or its
    removal. A sync reads the disk's text of every file indexed from a buffer too, so ``open_texts``,
    the buffers still open, are indexed again after it (a save of one note dropped another's unsaved
    text from the index until its next keystroke)."""
    synced = False
    for rel, text in edits.items():
        memory_file = workspace.classify(rel)
        if memory_file is None:
            continue
        if text is not None:
            indexer.index_text(memory_file, text)
            vectors.touch()  # (its chunks were embedded at once: nothing to drain, a checkpoint later)
        elif (workspace.root / rel).is_file():
            if not synced:
                indexer.sync(vectors="later" if vectors.enabled else "now")
                vectors.wake()
                synced = True
        else:
            indexer.remove(rel)
    if synced and open_texts:
        apply_edits(indexer, workspace, open_texts, vectors)
