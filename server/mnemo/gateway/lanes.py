"""Lanes: the turns of one session run one at a time, in arrival order; different sessions run at once.

A message for a busy session waits in that session's lane (up to ``queue_limit``; more are refused).
At most ``max_concurrent`` turns run at the same time across all lanes; each runs in a worker thread so
the event loop (and every other connection) stays responsive while a model generates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from mnemo.errors import MnemoError

T = TypeVar("T")


class LaneFull(MnemoError):
    """A session already has ``queue_limit`` messages waiting."""


class UserBusy(MnemoError):
    """A principal already has its share of memory calls running."""


class UserSlots:
    """At most ``per_user`` calls running per principal: one user's burst (or a slow call) cannot take
    the worker threads the others need. Over the limit the call is refused at once (a busy error, the
    client retries) rather than queued, so a waiting queue cannot grow without bound either."""

    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self._running: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, user: str) -> Iterator[None]:
        """Hold one of ``user``'s slots (event-loop only: no lock needed)."""
        running = self._running.get(user, 0)
        if running >= self.per_user:
            raise UserBusy(
                f"busy: you already have {running} memory calls running (limit {self.per_user}); "
                "try again when one answers"
            )
        self._running[user] = running + 1
        try:
            yield
        finally:
            left = self._running[user] - 1
            if left:
                self._running[user] = left
            else:
                del self._running[user]

    def running(self) -> int:
        return sum(self._running.values())


@dataclass
class _Lane:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0
    running: bool = False
    abandoned: bool = False
    """Its caller gave up on the running turn (timeout, client gone); the worker runs on until it notices."""


class Lanes:
    def __init__(self, max_concurrent: int, queue_limit: int) -> None:
        self.max_concurrent = max_concurrent
        self.queue_limit = queue_limit
        self._lanes: dict[str, _Lane] = {}
        self._slots = asyncio.Semaphore(max_concurrent)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrent, thread_name_prefix="mnemo-lane")
        self.completed = 0

    async def run(self, key: str, work: Callable[[], T]) -> T:
        """Run ``work`` in ``key``'s lane once the turns queued before it are done.

        A caller that stops waiting (its timeout, a client gone) gets its CancelledError at once, but the
        lane and the concurrency slot stay taken until the worker thread has ended: the session's next
        turn never runs beside it, and nothing is steered into it."""
        lane = self._lanes.setdefault(key, _Lane())
        if lane.waiting >= self.queue_limit:
            raise LaneFull(
                f"this conversation already has {lane.waiting} messages waiting; try again when it answers"
            )
        lane.waiting += 1
        try:
            await lane.lock.acquire()  # asyncio.Lock wakes its waiters first in, first out
        except BaseException:  # cancelled while waiting
            lane.waiting -= 1
            self._drop_if_idle(key, lane)
            raise
        lane.waiting -= 1
        try:
            await self._slots.acquire()
        except BaseException:
            lane.lock.release()
            self._drop_if_idle(key, lane)
            raise
        lane.running, lane.abandoned = True, False
        future = asyncio.get_running_loop().run_in_executor(self._pool, work)
        future.add_done_callback(lambda done: self._turn_ended(key, lane, done))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            lane.abandoned = True
            raise

    def _turn_ended(self, key: str, lane: _Lane, done: asyncio.Future[T]) -> None:
        """The worker thread has ended (on the event loop): free the slot and the lane."""
        if not done.cancelled():
            done.exception()  # (retrieved: an abandoned turn's failure is not reported again)
        lane.running, lane.abandoned = False, False
        self.completed += 1
        self._slots.release()
        lane.lock.release()
        self._drop_if_idle(key, lane)

    def _drop_if_idle(self, key: str, lane: _Lane) -> None:
        if not lane.running and lane.waiting == 0 and not lane.lock.locked():
            self._lanes.pop(key, None)

    def steerable(self, key: str) -> bool:
        """A turn of ``key`` runs, its caller still waits for it, and no message waits behind it: a new
        one may join that turn without overtaking anything (event-loop only, like :meth:`run`)."""
        lane = self._lanes.get(key)
        return lane is not None and lane.running and not lane.abandoned and lane.waiting == 0

    def stats(self) -> dict[str, int]:
        return {
            "lanes": len(self._lanes),
            "running": sum(1 for lane in self._lanes.values() if lane.running),
            "waiting": sum(lane.waiting for lane in self._lanes.values()),
            "completed": self.completed,
            "maxConcurrent": self.max_concurrent,
        }

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
