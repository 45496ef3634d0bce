"""Lanes: the turns of one session run one at a time, in arrival order; different sessions run at once.

A message for a busy session waits in that session's lane (up to ``queue_limit``; more are refused).
At most ``max_concurrent`` turns run at the same time across all lanes; each runs in a worker thread so
the event loop (and every other connection) stays responsive while a model generates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from mnemo.errors import MnemoError

T = TypeVar("T")


class LaneFull(MnemoError):
    """A session already has ``queue_limit`` messages waiting."""


@dataclass
class _Lane:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0
    running: bool = False


class Lanes:
    def __init__(self, max_concurrent: int, queue_limit: int) -> None:
        self.max_concurrent = max_concurrent
        self.queue_limit = queue_limit
        self._lanes: dict[str, _Lane] = {}
        self._slots = asyncio.Semaphore(max_concurrent)
        self._pool = ThreadPoolExecutor(max_workers=max_concurrent, thread_name_prefix="mnemo-lane")
        self.completed = 0

    async def run(self, key: str, work: Callable[[], T]) -> T:
        """Run ``work`` in ``key``'s lane once the turns queued before it are done."""
        lane = self._lanes.setdefault(key, _Lane())
        if lane.waiting >= self.queue_limit:
            raise LaneFull(
                f"this conversation already has {lane.waiting} messages waiting; try again when it answers"
            )
        lane.waiting += 1
        counted = True
        try:
            async with lane.lock:  # asyncio.Lock wakes its waiters first in, first out
                lane.waiting -= 1
                counted = False
                async with self._slots:
                    lane.running = True
                    try:
                        return await asyncio.get_running_loop().run_in_executor(self._pool, work)
                    finally:
                        lane.running = False
                        self.completed += 1
        finally:
            if counted:  # cancelled while waiting
                lane.waiting -= 1
            if not lane.running and lane.waiting == 0 and not lane.lock.locked():
                self._lanes.pop(key, None)

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
