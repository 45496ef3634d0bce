"""QueryVectors: the query embeddings of recent searches, so a repeated query skips the model.

The same text comes back often: the agent recalls with the user's message and again after a tool step,
an editor re-runs a search as filters change, a hover asks what a search just asked. Embedding a short
query is most of a warm hybrid search's time on a CPU (llama.cpp), so the vectors of the last
:data:`CAPACITY` queries are kept, keyed by (provider, model, text): another model never reuses them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from mnemo.embeddings import Embedder

CAPACITY = 512
"""Queries remembered (least recently used dropped first): ~0.8 MB of 384-dim vectors."""


class QueryVectors:
    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._vectors: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def vector(self, embedder: Embedder, query: str) -> np.ndarray:
        """The query's embedding by ``embedder``, from the cache when this model embedded it lately."""
        key = (embedder.provider, embedder.model, query)
        with self._lock:
            found = self._vectors.get(key)
            if found is not None:
                self._vectors.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        vector: np.ndarray = embedder.embed([query])[0]  # outside the lock: the model is slow
        vector.setflags(write=False)  # shared by every search of this text
        with self._lock:
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.capacity:
                self._vectors.popitem(last=False)
        return vector

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
