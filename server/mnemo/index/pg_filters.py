"""Search filters in the PostgreSQL engine: their SQL condition, and the chunk ids they allow.

A filtered search (kinds, tags, project, type, dates: :mod:`mnemo.search.filters`) asks the reader for
the ids its filter allows (:meth:`mnemo.index.pg_reader.PgReader.allowed_ids`), then gives them to both
candidate searches. Two things keep that cheap on a large namespace:

- the ids are kept per process (:class:`AllowedMemo`) for the generation's postings version, so a filter
  that recurs (an editor's or a gateway's) is read once until a write changes the generation: reading a
  common filter's ids was ~15 ms a search at 10,000 notes;
- they come as :class:`FilteredIds`, which carries the filter's condition: a nearest-neighbour search
  over many of them filters inside the HNSW scan (pgvector's iterative scan) instead of sending every
  id to the server and computing each one's distance (17 -> ~4 ms at 10,000 notes for ``kinds: daily``);
  a few of them are still searched exactly, by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import psycopg

from mnemo.index.api import MEMORY_FILES, ChunkFilter
from mnemo.index.pg_schema import SCHEMA
from mnemo.index.versioned_memo import VersionedMemo
from mnemo.workspace.layout import FileKind

_KIND_SQL = {
    "memory": "c.path = ANY(%(memory_files)s)",
    "topic": "(c.kind = 'evergreen' AND NOT c.path = ANY(%(memory_files)s))",
    **{kind.value: f"c.kind = '{kind.value}'" for kind in FileKind},
}


def filter_condition(f: ChunkFilter) -> tuple[str, dict[str, object]]:
    """The SQL condition of a search filter over ``chunks c LEFT JOIN file_meta m``, and its parameters."""
    parts: list[str] = []
    params: dict[str, object] = {"memory_files": list(MEMORY_FILES)}
    if f.kinds:
        parts.append("(" + " OR ".join(_KIND_SQL[k] for k in f.kinds) + ")")
    if f.tags:
        parts.append("coalesce(m.tags, '{}') @> %(tags)s::text[]")
        params["tags"] = list(f.tags)
    for name, value in (("project", f.project), ("type", f.type)):
        if value is not None:
            parts.append(f"lower(m.{name}) = lower(%({name})s)")
            params[name] = value
    if f.since is not None:
        parts.append("coalesce(c.day, m.day) >= %(since)s")
        params["since"] = f.since
    if f.until is not None:
        parts.append("coalesce(c.day, m.day) <= %(until)s")
        params["until"] = f.until
    return " AND ".join(parts) or "true", params


def uses_file_meta(condition: str) -> bool:
    """Whether a :func:`filter_condition` reads the front matter (``file_meta m``), not only ``chunks c``."""
    return "m." in condition


class FilteredIds(Sequence[int]):
    """The chunk ids a search filter allows, ascending, with the filter's SQL condition over ``chunks c``
    (and ``file_meta m``) and its parameters; ``share``: the part of the generation's chunks they are."""

    def __init__(self, ids: np.ndarray, condition: str, params: dict[str, object], share: float) -> None:
        self.ids = ids
        self.condition = condition
        self.params = params
        self.share = share

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [int(i) for i in self.ids[index]]
        return int(self.ids[index])

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.ids if dtype is None else self.ids.astype(dtype)

    def tolist(self) -> list[int]:
        return [int(i) for i in self.ids.tolist()]


class AllowedMemo(VersionedMemo[tuple[int, str, str], np.ndarray]):
    """A process's recently used filters' ids by (generation, condition, parameters), for the
    generation's postings version. At most ``capacity`` ids in all (8 bytes each: 4 million, 32 MB)."""

    def __init__(self, capacity: int = 4_000_000) -> None:
        super().__init__(capacity, len)


def allowed_ids(
    con: psycopg.Connection, generation: int, chunk_filter: ChunkFilter, memo: AllowedMemo | None
) -> FilteredIds:
    """The ids ``chunk_filter`` allows in ``generation``, from ``memo`` when it holds them at the
    generation's current version (one small query to learn it)."""
    condition, params = filter_condition(chunk_filter)
    row = con.execute(
        f"SELECT version, docs FROM {SCHEMA}.generations WHERE id = %s", [generation]
    ).fetchone()
    version, docs = (int(row[0]), int(row[1])) if row else (-1, 0)
    key = (generation, condition, repr(sorted(params.items())))
    ids = memo.get(key, version) if memo is not None else None
    if ids is None:
        join = (
            f"LEFT JOIN {SCHEMA}.file_meta m ON m.g = c.g AND m.path = c.path"
            if uses_file_meta(condition)
            else ""
        )
        rows = con.execute(
            f"SELECT c.id FROM {SCHEMA}.chunks c {join} WHERE c.g = %(g)s AND {condition} ORDER BY c.id",
            {**params, "g": generation},
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        if memo is not None:
            memo.put(key, version, ids)
    return FilteredIds(ids, condition, params, len(ids) / docs if docs else 1.0)
