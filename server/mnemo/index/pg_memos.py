"""What a PostgreSQL reader process keeps between searches, each value valid at the generation's postings
version it was read at (any write moves the version on): postings, the best chunks by common words, and
queries' term statistics (:mod:`mnemo.index.pg_terms` uses them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mnemo.index.maxscore import CommonTop
from mnemo.index.versioned_memo import VersionedMemo

if TYPE_CHECKING:
    from mnemo.index.pg_terms import QueryWeights

Postings = tuple[np.ndarray, np.ndarray]
"""A term's chunk ids (ascending; int32 while they fit) and each posting's BM25 share before IDF
(``tf*(k1+1) / (tf + k1*(1-b+b*len/avgdl))``, at the generation's average length for the version it
was read at)."""


class PostingsMemo(VersionedMemo[tuple[int, str], Postings]):
    """Recently used postings by (generation, term). Searches share most of their words ("the", a
    project's name), and a common word's postings run to tens of thousands of rows: kept here, a
    repeated word costs nothing until a write changes the generation's postings. At most ``capacity``
    bytes (12 a posting while chunk ids fit in 32 bits: 128 MB hold 11 million). The 100 benchmark
    queries at 100,000 notes use 9.1 million postings; at 16 bytes a posting the 8 million that fitted
    were read again on every pass, least recently used first (docs/benchmarks.md, team memory)."""

    def __init__(self, capacity: int = 128 << 20) -> None:
        super().__init__(capacity, lambda postings: postings[0].nbytes + postings[1].nbytes)
        self.tops = CommonTops()
        """The best chunks by recent queries' common terms alone, at the same versions."""


class CommonTops(VersionedMemo[tuple[int, tuple[str, ...]], CommonTop]):
    """:class:`mnemo.index.maxscore.CommonTop` by (generation, common terms): queries share their common
    words, and adding up those words' lists was most of a warm search's keyword time at 100,000 notes."""

    def __init__(self, capacity: int = 4 << 20) -> None:
        super().__init__(capacity, lambda top: top.ids.nbytes + top.scores.nbytes + 64)


class WeightsMemo(VersionedMemo[tuple[int, tuple[str, ...]], "tuple[QueryWeights | None]"]):
    """Recent queries' statistics (:func:`query_weights`) by (generation, query terms), each valid at
    the postings version it was read at: searches repeat their queries, and reading a query's terms' df
    was a round trip of ~0.7 ms a search at 100,000 notes."""

    def __init__(self, capacity: int = 256) -> None:
        super().__init__(capacity, lambda _: 1)


class SnapshotWeights:
    """The query statistics one snapshot has: those it read, and those the process kept (``memo``) at
    the version the snapshot sees."""

    def __init__(self, generation: int, version: int, memo: WeightsMemo | None = None) -> None:
        self.generation, self.version, self.memo = generation, version, memo
        self._read: dict[tuple[str, ...], QueryWeights | None] = {}

    def get(self, key: tuple[str, ...]) -> tuple[QueryWeights | None] | None:
        """``(weights,)`` when known (weights None: no chunk has the query's terms), else None."""
        if key in self._read:
            return (self._read[key],)
        return None if self.memo is None else self.memo.get((self.generation, key), self.version)

    def put(self, key: tuple[str, ...], weights: QueryWeights | None) -> None:
        self._read[key] = weights
        version = self.version if weights is None else weights.version
        if self.memo is not None and version == self.version:
            self.memo.put((self.generation, key), version, (weights,))
