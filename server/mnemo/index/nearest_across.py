"""Each chunk's most similar chunk in another group (another file): the workspace near-duplicate pass.

Every chunk is compared with every other, a block of rows at a time (one matrix product of about
:data:`BLOCK_FLOATS` similarities, at least :data:`BLOCK_ROWS` rows): one product per file read the whole
matrix for a few rows, bound by memory (41 s of wall, 81 s of CPU a pass at 10,000 notes, against 6.6 and
13 s; docs/benchmarks.md). The writer runs it on its own vectors in memory
(:meth:`mnemo.index.vector_cache.VectorCache.nearest_across`), without the copy of every vector a pass
made before (~11 MB at 2,000 notes, twice); a reader without them gathers the vectors first
(:func:`nearest_across_vectors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from mnemo.index.api import ChunkRecord

BLOCK_FLOATS = 1 << 20
"""Similarities worked out per matrix product (~4 MB of float32)."""
BLOCK_ROWS = 128
"""Fewest rows per product (a product of a few rows is bound by memory, not arithmetic)."""
NO_MATCH = -2.0
"""The cosine reported where a row has no row of another group (below any real cosine)."""

Nearest = dict[int, tuple[int, float]]
"""Chunk id -> (id of its most similar chunk in another group, their cosine)."""


def block_rows(columns: int) -> int:
    """Rows per product against ``columns`` rows."""
    return max(BLOCK_ROWS, BLOCK_FLOATS // max(1, columns))


def nearest_in_block(
    matrix: np.ndarray, inverse_norms: np.ndarray, groups: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``rows``: the row of ``matrix`` in another group with the highest cosine, and that
    cosine (:data:`NO_MATCH` when there is none). ``groups[r] < 0``: row ``r`` is no one's match (a free
    row, another source's chunk); ``inverse_norms``: 1 / each row's norm (0 for a zero row)."""
    sims = matrix[rows] @ matrix.T
    sims *= inverse_norms[rows, None]
    sims *= inverse_norms[None, :]
    sims[(groups[rows, None] == groups[None, :]) | (groups < 0)[None, :]] = NO_MATCH
    best = np.argmax(sims, axis=1)
    return best, sims[np.arange(len(rows)), best]


def matched(
    ids: Sequence[int], of_row: np.ndarray, best: np.ndarray, cosine: np.ndarray
) -> Iterable[tuple[int, tuple[int, float]]]:
    """(chunk id, (its match's id, cosine)) for the rows of a block that have a match; ``of_row`` maps a
    row of the matrix to its chunk id."""
    for cid, row, value in zip(ids, best.tolist(), cosine.tolist(), strict=True):
        if value > NO_MATCH:
            yield cid, (int(of_row[row]), float(value))


def nearest_across_vectors(vectors: Mapping[int, np.ndarray], groups: Mapping[int, int]) -> Nearest:
    """:func:`nearest_in_block` over the chunks of ``groups`` (chunk id -> group, >= 0) that have a vector
    in ``vectors``, block by block."""
    ids = [cid for cid in groups if cid in vectors]
    if not ids:
        return {}
    matrix = np.array([vectors[cid] for cid in ids], dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    group_of = np.array([groups[cid] for cid in ids], dtype=np.int64)
    of_row = np.array(ids, dtype=np.int64)
    out: Nearest = {}
    step = block_rows(len(ids))
    for start in range(0, len(ids), step):
        rows = np.arange(start, min(len(ids), start + step))
        best, cosine = nearest_in_block(matrix, inverse, group_of, rows)
        out.update(matched(ids[start : start + step], of_row, best, cosine))
    return out


def pairs_across_files(
    records: Sequence[ChunkRecord], nearest: Callable[[Mapping[int, int]], Nearest]
) -> list[tuple[ChunkRecord, ChunkRecord, float]]:
    """(chunk, its most similar chunk of another file among ``records``, cosine) for each of ``records``
    that has one, in the records' order; ``nearest`` works it out with the files as groups."""
    paths: dict[str, int] = {}
    groups = {record.id: paths.setdefault(record.path, len(paths)) for record in records}
    if len(paths) < 2:
        return []
    by_id = {record.id: record for record in records}
    matches = nearest(groups)
    return [
        (record, by_id[matches[record.id][0]], matches[record.id][1])
        for record in records
        if record.id in matches
    ]
