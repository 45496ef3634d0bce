"""A process's recently used values, each valid for the version it was read at: the engines' caches of
what a search read (postings, term statistics), dropped by any write that moves the version on."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class VersionedMemo(Generic[K, V]):
    """A process's recently used values by key, each valid for the version it was read at (a
    generation's postings version, a count of commits: any write moves it on); a value of another version is a miss and is
    replaced. At most ``capacity`` in all, measured by ``size``, the least recently used dropped first;
    a value over half the capacity is not kept (it would push out everything else)."""

    def __init__(self, capacity: int, size: Callable[[V], int]) -> None:
        self.capacity = capacity
        self._size_of = size
        self._lock = threading.Lock()
        self._items: OrderedDict[K, tuple[int, V]] = OrderedDict()
        self._size = 0

    def get(self, key: K, version: int) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] != version:
                return None
            self._items.move_to_end(key)
            return found[1]

    def put(self, key: K, version: int, value: V) -> None:
        size = self._size_of(value)
        if size > self.capacity // 2:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._size -= self._size_of(old[1])
            self._items[key] = (version, value)
            self._size += size
            while self._size > self.capacity and self._items:
                _, (_, dropped) = self._items.popitem(last=False)
                self._size -= self._size_of(dropped)
