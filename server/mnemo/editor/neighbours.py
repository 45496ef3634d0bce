"""One file's near-duplicates from the index's own nearest-neighbour search.

The workspace pass compares every memory chunk with every other (:class:`mnemo.editor.hygiene.VectorSpace`,
from :meth:`mnemo.index.api.IndexReader.nearest_in_other_files`). Diagnosing one edited file that way
copied every chunk's vector for each edit (22 MB at 2,000 notes, ten times that at 20,000). Here each of the file's chunks asks the index for
its nearest chunks instead (exact in the writer's in-memory vectors, HNSW otherwise) and takes the first
in another memory file long enough to compare, asking for more neighbours while the nearest are all the
file's own or too short.
"""

from __future__ import annotations

import numpy as np

from mnemo.editor.hygiene import MIN_DUPLICATE_CHARS, ChunkVector
from mnemo.index.api import ChunkRecord, IndexReader

FIRST_ASK = 8
"""Neighbours asked for beyond the file's own chunks; four times more each time none would do."""


def chunk_vector(record: ChunkRecord, vector: np.ndarray | None = None) -> ChunkVector:
    """A chunk as hygiene compares it (without its vector unless given: pairs carry the cosine)."""
    return ChunkVector(
        record.path, record.start_line, record.end_line, record.heading, record.text,
        _NO_VECTOR if vector is None else vector,
    )  # fmt: skip


def comparable(record: ChunkRecord) -> bool:
    """A memory chunk long enough to be reported as a near-duplicate (or to be one's match)."""
    return record.source == "memory" and len(record.text.strip()) >= MIN_DUPLICATE_CHARS


class IndexNeighbours:
    """:meth:`nearest_other` for one file at a time, through an open reader (valid inside its
    ``reading()``)."""

    def __init__(self, reader: IndexReader) -> None:
        self.reader = reader

    def nearest_other(self, path: str) -> list[tuple[ChunkVector, ChunkVector, float]]:
        """(chunk of ``path``, its most similar chunk in another memory file, cosine) for each chunk of
        ``path`` long enough to compare, as :meth:`mnemo.editor.hygiene.VectorSpace.nearest_other`."""
        own = [
            (c, c.embedding)
            for c in self.reader.chunks_of(path, with_vectors=True)
            if c.embedding is not None
        ]
        out = []
        for chunk, vector in own:
            if not comparable(chunk):
                continue
            found = self._nearest_elsewhere(vector, path, len(own) + FIRST_ASK)
            if found is not None:
                other, cosine = found
                out.append((chunk_vector(chunk, vector), chunk_vector(other), cosine))
        return out

    def _nearest_elsewhere(self, vector: np.ndarray, path: str, ask: int) -> tuple[ChunkRecord, float] | None:
        """The nearest comparable chunk outside ``path`` and its cosine; None when there is none."""
        norm = float(np.linalg.norm(vector))
        if norm == 0:
            return None
        query = (vector / norm).astype(np.float32)
        while True:
            hits = self.reader.nearest(query, ask)
            records = self.reader.records([h.chunk_id for h in hits])
            for hit in hits:
                record = records.get(hit.chunk_id)
                if record is not None and record.path != path and comparable(record):
                    return record, 1.0 - hit.distance
            if len(hits) < ask:  # every chunk with a vector was looked at
                return None
            ask *= 4


_NO_VECTOR = np.zeros(0, dtype=np.float32)
