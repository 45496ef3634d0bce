"""How many searches of one process run at once, and in which order the others start.

A search's own Python (ranking, the keyword scan, reading rows) runs under the interpreter's lock, and on
a machine with few cores the database or the embedding model needs the same cores. Searches beyond a few
at once gain nothing; they take turns for the lock and the cores, and the lock is not handed over in
order of arrival: a search can lose it again and again while others finish. With 8 searches at once in
one process, at 100,000 notes on PostgreSQL and 2 cores, the p95 was 92-132 ms in ten runs; let in two at
a time, in order of arrival, 62-93 ms, the median a little slower (54 -> 63 ms; docs/benchmarks.md,
"Ninth round at 100,000 notes").

:class:`SearchGate` lets ``slots`` searches in at once and the rest in the order they came: a search
that ends hands its place to the longest waiting one, never to a newcomer.
"""

from __future__ import annotations

import collections
import threading
from types import TracebackType

from mnemo.embeddings.threads import usable_cores

MIN_SLOTS = 2
"""At least one search's Python while another waits for the database."""


def search_slots(setting: int) -> int:
    """Searches let in at once for ``[search] searches_at_once``: the setting, or with 0 the cores
    this process may use (its affinity and a cgroup quota: a container given 2 cores of a 64-core host
    gets 2), at least :data:`MIN_SLOTS`."""
    if setting > 0:
        return setting
    return max(MIN_SLOTS, usable_cores())


class SearchGate:
    """At most ``slots`` holders at once; the others wait and come in first come, first served."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a search gate needs at least one slot, not {slots}")
        self.slots = slots
        self._free = slots
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Event()
            self._waiting.append(turn)
        try:
            turn.wait()  # the place is handed over by __exit__: no newcomer takes it first
        except BaseException:  # interrupted while waiting: give up the turn, or the place if it came
            with self._lock:
                if turn in self._waiting:
                    self._waiting.remove(turn)
                    raise
            self._leave()
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._leave()

    def _leave(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._free += 1

    @property
    def waiting(self) -> int:
        """Searches waiting for their turn now."""
        with self._lock:
            return len(self._waiting)
