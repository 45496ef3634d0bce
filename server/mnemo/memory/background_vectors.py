"""BackgroundEmbedder: gives pending chunks their vectors on one worker thread, batch after committed batch.

A server (the editor's, the gateway's) commits the keyword side of an index in seconds and lets this
thread embed the rest (:mod:`mnemo.index.pending`): searches are hybrid over the chunks that have vectors
and keyword over the others meanwhile. The thread embeds until nothing is pending, then sleeps until a
sync or an edit wakes it. ``cancel`` (the server's indexing cancel: shutdown, client gone, re-index)
interrupts the batch in hand between two texts; what was committed stays, the rest is still pending and
is embedded after the next wake or by the next process. :meth:`close` ends the thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Literal

from mnemo.index.api import IndexReader
from mnemo.index.engine import IndexEngine
from mnemo.index.pending import EMBED_BATCH, Cancel, StepResult
from mnemo.memory.notes import vectors_note

log = logging.getLogger(__name__)

SEARCH_FIRST_S = 2.0
"""How long the embedding thread waits for running searches before it embeds its next text."""
RETRY_AFTER_S = 5.0
"""After a failed batch (the index busy or being repaired), the thread waits this long or for a wake."""
QUIET_S = 5.0
"""After this long with no wake (no sync, edit or batch), the thread calls ``on_quiet`` once: the writer
checkpoints then (:meth:`mnemo.index.indexer.Indexer.checkpoint`)."""
FEW_PENDING = EMBED_BATCH
"""``vectors="few"``: at most this many pending chunks are embedded before a read answers."""

Vectors = Literal["wait", "background", "later", "few"]
"""When a sync's pending chunks get their vectors (the keyword side is always committed first):
``wait`` before it returns; ``background`` on the embedding thread (:meth:`MemoryService.embed_in_background`);
``later`` not in this call; ``few`` now when at most FEW_PENDING are pending (a read: `mnemo search`),
else later. Default: ``background`` once the thread was started, else ``wait``."""

Step = Callable[[Cancel], StepResult | None]
"""Embed and commit one batch; None when nothing is pending."""


class _Either:
    """Set when any of the events is."""

    def __init__(self, *events: threading.Event | None) -> None:
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class BackgroundEmbedder:
    def __init__(
        self,
        step: Step,
        on_commit: Callable[[StepResult], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        on_quiet: Callable[[], None] | None = None,
    ) -> None:
        self._step = step
        self._on_commit = on_commit
        self._on_idle = on_idle
        """Called on the thread when it runs out of work after committing at least one batch."""
        self._on_quiet = on_quiet
        """Called on the thread once :data:`QUIET_S` has passed with no wake after one."""
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._cancel: threading.Event | None = None
        self._dirty = False
        """Woken since the last batch started: there may be new pending chunks."""
        self._unquiet = False
        """Written to since ``on_quiet`` was last called (a wake or :meth:`touch`)."""
        self._idle = True

    @property
    def enabled(self) -> bool:
        return self._thread is not None and not self._closed.is_set()

    def start(self, cancel: threading.Event | None = None) -> None:
        """Start the thread (once; a later call only replaces the cancel event) and look for work."""
        with self._cond:
            if cancel is not None:
                self._cancel = cancel
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, name="mnemo-embed", daemon=True)
                self._thread.start()
        self.wake()

    def wake(self) -> None:
        """New pending chunks may have been committed (a sync or an edit)."""
        with self._cond:
            self._dirty = True
            self._unquiet = True
            self._idle = False
            self._cond.notify_all()

    def touch(self) -> None:
        """Something was written but nothing left pending (a buffer edit, embedded at once): only
        ``on_quiet`` is due, once the writes stop."""
        with self._cond:
            self._unquiet = True
            self._cond.notify_all()

    def busy(self) -> bool:
        """Work in hand or asked for (False once everything pending was embedded, or it was cancelled)."""
        with self._cond:
            return self.enabled and not self._idle

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until the thread has nothing left to do (True) or ``timeout_s`` passes (False)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.enabled and not self._idle:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _run(self) -> None:
        unannounced = False  # vectors filled since the listener last heard it has caught up
        while not self._closed.is_set():
            if unannounced and not self._dirty and self._on_idle is not None:
                unannounced = False
                self._call(self._on_idle)
            quiet = self._wait_for_work()
            if quiet is not None:
                self._call(quiet)
                continue
            with self._cond:
                self._dirty = False
                cancel = _Either(self._closed, self._cancel)
            if self._closed.is_set():
                break
            unannounced = self._drain(cancel) or unannounced
        with self._cond:
            self._idle = True
            self._cond.notify_all()

    def _wait_for_work(self) -> Callable[[], None] | None:
        """Until woken or closed (None), or, after writes, until :data:`QUIET_S` passes with no more:
        then ``on_quiet``, for the caller to call (once until the next write)."""
        with self._cond:
            while not self._dirty and not self._closed.is_set():
                self._idle = True
                self._cond.notify_all()
                if not (self._unquiet and self._on_quiet is not None):
                    self._cond.wait()
                elif not self._cond.wait(QUIET_S) and not self._dirty and not self._closed.is_set():
                    self._unquiet = False
                    return self._on_quiet
            return None

    @staticmethod
    def _call(listener: Callable[[], None]) -> None:
        try:
            listener()
        except Exception:  # a listener's failure never stops the embedding thread
            log.exception("a vectors listener failed")

    def _drain(self, cancel: _Either) -> bool:
        """Embed batches until nothing is pending, the batch makes no progress, or ``cancel``; True
        when at least one batch filled vectors."""
        stalled, filled = 0, False
        while not cancel.is_set() and stalled < 2:
            try:
                step = self._step(cancel)
            except Exception as exc:  # the index busy, closed or repaired: try again later
                log.warning("embedding pending chunks failed: %s; trying again later", exc)
                with self._cond:
                    self._cond.wait(RETRY_AFTER_S)
                    self._dirty = True
                return filled
            if step is None:
                return filled
            filled = filled or step.filled > 0
            if self._on_commit is not None:
                self._on_commit(step)
            with self._cond:
                self._cond.notify_all()
            stalled = stalled + 1 if step.filled == 0 else 0  # its chunks were rewritten meanwhile
        return filled


class PendingVectors:
    """The vector side of the writer's index: the embedding thread, progress counts and notes, and
    searches first (the thread waits while a search runs before it takes the model for its next text).

    ``recovering`` runs a call through the memory service's repair-and-retry; ``generation`` is the
    service's index generation and ``changed`` bumps it (after each committed batch)."""

    def __init__(
        self,
        indexer: IndexEngine,
        write_lock: contextlib.AbstractContextManager[object],
        recovering: Callable[[Callable[[], StepResult | None]], StepResult | None],
        generation: Callable[[], int],
        changed: Callable[[], int],
    ) -> None:
        self.indexer = indexer
        self.thread = BackgroundEmbedder(
            self._step, on_commit=self._committed, on_idle=self._all_embedded, on_quiet=self._checkpoint
        )
        self.idle_listeners: list[Callable[[], None]] = []
        """Called on the embedding thread when it has embedded everything pending (editor diagnostics
        that need vectors, such as near-duplicates, are recomputed then)."""
        self._write_lock = write_lock
        self._recovering = recovering
        self._generation = generation
        self._changed = changed
        self._searching = 0
        self._lock = threading.Lock()
        self._counts: tuple[int, tuple[int, int]] = (-1, (0, 0))
        """(generation, (chunks with a vector, chunks)): counted once per index change."""

    @property
    def enabled(self) -> bool:
        return self.thread.enabled

    def start(self, cancel: threading.Event | None = None) -> None:
        self.thread.start(cancel)

    def wake(self) -> None:
        if self.thread.enabled:
            self.thread.wake()

    def touch(self) -> None:
        """A write that left nothing pending: the writer checkpoints once writes stop (:data:`QUIET_S`)."""
        if self.thread.enabled:
            self.thread.touch()

    def busy(self) -> bool:
        return self.thread.busy()

    def close(self) -> None:
        self.thread.close()

    @contextlib.contextmanager
    def searching(self) -> Iterator[None]:
        with self._lock:
            self._searching += 1
        try:
            yield
        finally:
            with self._lock:
                self._searching -= 1

    def _searches_first(self) -> None:
        deadline = time.monotonic() + SEARCH_FIRST_S
        while self._searching > 0 and time.monotonic() < deadline:
            time.sleep(0.005)

    def _step(self, cancel: Cancel) -> StepResult | None:
        return self._recovering(
            lambda: self.indexer.embed_step(
                write_lock=self._write_lock, cancel=cancel, pause=self._searches_first
            )
        )

    def _all_embedded(self) -> None:
        for listener in list(self.idle_listeners):
            listener()

    def _checkpoint(self) -> None:
        """The writer has been quiet for a while: what DuckDB holds in memory for its last writes goes
        to the file (rows written since the last checkpoint stay in memory until one)."""
        with self._write_lock:
            self.indexer.checkpoint()

    def _committed(self, step: StepResult) -> None:
        self._counts = (self._changed(), (step.total - step.pending, step.total))

    def counts(self, reader: IndexReader | None = None) -> tuple[int, int]:
        """(chunks with a vector, chunks) of the open index; ``reader``: one already held to count with."""
        generation, counts = self._counts
        if generation == self._generation():
            return counts
        generation = self._generation()
        if reader is not None:
            found = reader.counts()
        else:
            with self.indexer.reading() as held:
                if held is None:
                    return (0, 0)
                found = held.counts()
        counts = (found.embedded, found.chunks)
        self._counts = (generation, counts)
        return counts

    def note(self, embedded: int, total: int) -> str:
        """What a search or status says while chunks wait for vectors."""
        return vectors_note(embedded, total, embedding=self.busy())

    def wait(
        self,
        progress: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
        poll_s: float = 0.5,
    ) -> bool:
        """Until the thread has embedded every pending chunk (True), reporting (chunks with a vector,
        chunks) every ``poll_s``; False when ``cancel`` is set first."""
        while not (cancel is not None and cancel.is_set()):
            idle = self.thread.wait_idle(poll_s)
            if progress is not None:
                progress(*self.counts())
            if idle:
                return True
        return False
