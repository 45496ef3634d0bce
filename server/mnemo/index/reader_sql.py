"""The SQL pieces :class:`mnemo.index.reader.DuckReader` is built from: vector constants and nearest-neighbour
queries, a search filter's condition, chunk rows by id (an ``IN`` list or point reads by rowid), and the
writer's counts and query statistics kept until its next commit (:class:`CountsMemo`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import methodcaller
from typing import TYPE_CHECKING, Any

from mnemo.index import fts
from mnemo.index.api import MEMORY_FILES, ChunkFilter, ChunkRecord, IndexCounts
from mnemo.index.duckdb_native import duckdb, sql_ids
from mnemo.index.versioned_memo import VersionedMemo
from mnemo.workspace.layout import FileKind

if TYPE_CHECKING:  # NumPy is loaded by the reads that return vectors: a keyword one-shot never does
    import numpy as np

_MEMORY = "(" + ", ".join(f"'{name}'" for name in MEMORY_FILES) + ")"
_KIND_SQL = {
    "memory": f"c.path IN {_MEMORY}",
    "topic": f"(c.kind = 'evergreen' AND c.path NOT IN {_MEMORY})",
    **{kind.value: f"c.kind = '{kind.value}'" for kind in FileKind},
}
RECORD_COLUMNS = "id, key, path, source, kind, day, start_line, end_line, heading, text"


def vector_literal(vector: np.ndarray) -> str:
    """A FLOAT[n] SQL constant of a float vector (only ever built from our own embeddings): one string
    cast, which DuckDB parses ~5x faster than a list of 384 numeric literals, and exactly (9 digits
    round-trip a float32; numeric literals went through DECIMAL and could miss by one ulp)."""
    values = ",".join(format(float(x), ".9g") for x in vector)
    return f"'[{values}]'::FLOAT[{len(vector)}]"


def vector_query(literal: str, limit: int, *, within: Sequence[int] | None = None) -> str:
    """Nearest chunks by cosine distance, in the shape DuckDB's vss rewrites to an HNSW index scan;
    ``within``: only those chunk ids (a filtered search: an exact scan), inlined (:func:`sql_ids`)."""
    where = f"WHERE id IN (SELECT unnest([{sql_ids(within)}]::BIGINT[])) " if within is not None else ""
    return (
        f"SELECT id, array_cosine_distance(embedding, {literal}) AS distance FROM chunks {where}"
        f"ORDER BY distance LIMIT {int(limit)}"
    )


def filter_condition(f: ChunkFilter) -> tuple[str, list[object]]:
    """The SQL condition of a search filter over ``chunks c LEFT JOIN file_meta m``, and its parameters."""
    parts: list[str] = []
    params: list[object] = []
    if f.kinds:
        parts.append("(" + " OR ".join(_KIND_SQL[k] for k in f.kinds) + ")")
    if f.tags:
        parts.append("list_has_all(coalesce(m.tags, []::VARCHAR[]), ?::VARCHAR[])")
        params.append(list(f.tags))
    for name, value in (("project", f.project), ("type", f.type)):
        if value is not None:
            parts.append(f"lower(m.{name}) = lower(?)")
            params.append(value)
    if f.since is not None:
        parts.append("coalesce(c.day, m.day) >= ?")
        params.append(f.since)
    if f.until is not None:
        parts.append("coalesce(c.day, m.day) <= ?")
        params.append(f.until)
    return " AND ".join(parts) or "true", params


def record_of(row: tuple[Any, ...], embedding: np.ndarray | None = None) -> ChunkRecord:
    """A row selected as ``RECORD_COLUMNS`` (in that column order) as a record."""
    cid, key, path, source, kind, day, start, end, heading, text = row[:10]
    return ChunkRecord(
        int(cid), key, path, source, kind, day, int(start), int(end), heading or "", text, embedding
    )


def float32_rows(column: Any) -> list[np.ndarray]:
    """A FLOAT[n] column from ``fetchnumpy`` (NumPy arrays already: a Python list of 384 floats per row,
    as ``fetchall`` gives, costs several times more) as float32 rows."""
    import numpy as np

    return [np.asarray(vector, dtype=np.float32) for vector in column]


FETCHALL, FETCHNUMPY = methodcaller("fetchall"), methodcaller("fetchnumpy")


def rows_by_id(
    con: duckdb.DuckDBPyConnection,
    select: str,
    ids: Sequence[int],
    fetch: Any,
    *,
    point: bool,
    also: str = "",
    complete: bool = False,
) -> Any:
    """``fetch`` of ``SELECT {select} FROM chunks`` for the chunks ``ids`` (``also``: a further
    condition); ``point``: read row by row through the ids' rowids (whether to:
    :meth:`mnemo.index.reader.DuckReader._point_reads`). A fill may move a row between the two reads: a
    point read also names the id, so it never answers with another chunk, and ``complete`` (every chunk
    found must come back) reads the ids again the plain way if one is missing."""
    in_list = f"SELECT {select} FROM chunks WHERE id IN ({sql_ids(ids)}) {also}"
    if not point:
        return fetch(con.execute(in_list))
    found = con.execute(f"SELECT rowid, id FROM chunks WHERE id IN ({sql_ids(ids)})").fetchall()
    reads = [f"SELECT {select} FROM chunks WHERE rowid = {int(r)} AND id = {int(i)} {also}" for r, i in found]
    got = fetch(con.execute(" UNION ALL ".join(reads or [f"SELECT {select} FROM chunks WHERE false"])))
    return fetch(con.execute(in_list)) if complete and len(got) < len(found) else got


class CountsMemo:
    """The writer's counts, and recent queries' term statistics, kept until its next commit: counting
    vectors reads the whole embedding column (several ms), and every search and status asks; a query's
    IDF reads the ``dict`` table (~2 ms a search at 2,000 notes), and searches repeat their words."""

    WEIGHTS_KEPT = 256
    """Queries whose statistics are kept between two commits (the least recently used go first)."""

    def __init__(self) -> None:
        self.writes = 0
        self._counts: tuple[int, IndexCounts] | None = None
        self._weights: VersionedMemo[tuple[str, ...], tuple[fts.QueryWeights | None]] = VersionedMemo(
            self.WEIGHTS_KEPT, lambda _: 1
        )

    def weights(
        self, terms: tuple[str, ...], read: Callable[[], fts.QueryWeights | None]
    ) -> fts.QueryWeights | None:
        """The statistics of ``terms`` since the last commit: kept, or ``read()`` and kept. As with the
        counts, what ``read()`` returns is never older than the commits counted before it (a commit is
        counted after it is made), and the next commit's number misses."""
        writes = self.writes
        kept = self._weights.get(terms, writes)
        if kept is not None:
            return kept[0]
        found = read()
        self._weights.put(terms, writes, (found,))
        return found

    def changed(self) -> None:
        """A transaction committed (called after its COMMIT)."""
        self.writes += 1

    def get(self, writes: int) -> IndexCounts | None:
        found = self._counts
        return found[1] if found is not None and found[0] == writes else None

    def put(self, writes: int, counts: IndexCounts) -> None:
        """``counts`` read after ``writes`` was seen: a commit in between makes them newer, never older,
        and the next :meth:`get` misses anyway (``writes`` moved on)."""
        self._counts = (writes, counts)
