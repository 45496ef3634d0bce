"""Python rows handed to DuckDB as one relation: NumPy for a small batch, Arrow for a large one.

An insert of many rows reads them from a relation (one statement, not one per row). DuckDB scans NumPy
arrays natively, but converts Python strings one by one (~50 µs a 1 KB text), while Arrow converts a
whole column at once. Importing pyarrow adds to the process for good (~24 MB), though, so only a build
(``build=True``: a new index's files, chunks and metadata) goes through Arrow, from :data:`BULK_ROWS` rows;
every write to a live index (an edit, new stamps after a checkout, the embedding steps, the retrieval log)
goes through NumPy however many rows it has, and a language server never loads pyarrow.

Arrow data goes to DuckDB as an Arrow C stream (:func:`arrow_view`), never as a pyarrow object: for one
of those, DuckDB imports pyarrow's dataset layer with its Parquet, ORC, S3, GCS and Azure modules (~0.05 s
of CPU, a third of a one-shot `mnemo index`'s imports, and ~58 MB of RSS with pyarrow). A stream is read
once; a batch read by several statements is copied into a temporary table (``read_once=False``).

Both paths give the same view: every column cast to its DuckDB type (tests check them equal).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mnemo.index.duckdb_native import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

BULK_ROWS = 256
"""Rows from which a batch goes through Arrow (the NumPy path's string conversion costs more)."""


@dataclass(frozen=True)
class VectorColumn:
    """A vector column: ``matrix`` (rows x dims, float32); rows marked in ``missing`` are NULL."""

    matrix: np.ndarray
    missing: Sequence[bool] = ()
    fixed: bool = True
    """FLOAT[dims] when True, else a list (FLOAT[])."""

    def sql_type(self) -> str:
        return f"FLOAT[{self.matrix.shape[1]}]" if self.fixed else "FLOAT[]"


Columns = Mapping[str, tuple[str, Sequence[Any]]]
"""Column name -> (DuckDB type, one value per row)."""


@contextlib.contextmanager
def batch_view(
    con: duckdb.DuckDBPyConnection,
    name: str,
    columns: Columns,
    vectors: tuple[str, VectorColumn] | None = None,
    *,
    read_once: bool = True,
    build: bool = False,
) -> Iterator[None]:
    """Make ``name`` a temporary view of the rows while the block runs (columns in the given order,
    the vector column last). ``read_once``: the block's statements read it once (an ``INSERT ... SELECT``);
    when they read it more, a large batch becomes a temporary table instead (an Arrow stream is read
    once). ``build``: a build's batch, through Arrow from :data:`BULK_ROWS` rows (see the module's notes)."""
    rows = len(next(iter(columns.values()))[1]) if columns else 0
    if vectors is not None:
        rows = max(rows, len(vectors[1].matrix))
    bulk = build and rows >= BULK_ROWS
    parts, select, sources = (_arrow_parts if bulk else _numpy_parts)(name, columns, vectors)
    kind = "VIEW" if read_once or not bulk else "TABLE"
    for part, value in parts.items():
        con.register(part, value)
    try:
        con.execute(f"CREATE OR REPLACE TEMP {kind} {name} AS SELECT {', '.join(select)} FROM {sources}")
        try:
            yield
        finally:
            con.execute(f"DROP {kind} IF EXISTS {name}")
    finally:
        for part in parts:
            con.unregister(part)


@contextlib.contextmanager
def arrow_view(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    """``table`` readable as ``name`` by one statement while the block runs: an Arrow C stream (see
    the module's notes; a second read raises DuckDB's "already been consumed")."""
    con.register(name, table.__arrow_c_stream__())
    try:
        yield
    finally:
        con.unregister(name)


def row_columns(rows: Sequence[Sequence[Any]], columns: Sequence[tuple[str, str]]) -> Columns:
    """Row tuples (values in ``columns``' order) as :data:`Columns`."""
    values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    return {name: (sql_type, list(v)) for (name, sql_type), v in zip(columns, values, strict=True)}


def _objects(values: Sequence[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):  # (one by one: lists of equal length would broadcast)
        array[i] = value
    return array


def _column_arrays(sql_type: str, values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """A column as a typed NumPy array, and a mask of its NULLs where the array can't hold them.
    Typed arrays, not Python objects: DuckDB inspects an object column value by value (~0.7 ms a
    1 KB string, against ~0.05 ms from a NumPy string array)."""
    nulls = [v is None for v in values]
    if sql_type in ("BIGINT", "INTEGER", "BOOLEAN") and not any(nulls):
        return np.asarray(list(values), dtype=bool if sql_type == "BOOLEAN" else np.int64), None
    if sql_type == "DOUBLE":
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64), None
    if sql_type == "TIMESTAMP" and all(v is None or getattr(v, "tzinfo", None) is None for v in values):
        return np.array(list(values), dtype="datetime64[us]"), None
    if sql_type in ("VARCHAR", "DATE") and all(
        v is None or (isinstance(v, str) and not v.endswith("\0")) for v in values
    ):  # (a NumPy string drops trailing NULs)
        strings = np.array(["" if v is None else v for v in values], dtype=str)
        return strings, (np.asarray(nulls, dtype=bool) if any(nulls) else None)
    return _objects(values), None


def _positional(parts: Sequence[str]) -> str:
    return " POSITIONAL JOIN ".join(f"{part} AS {part}" for part in parts)


class _Stacks:
    """1-D arrays of one kind registered as one 2-D array (DuckDB scans each row of it as a column):
    one registration for many columns, each one costing ~0.4 ms."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kinds: dict[str, list[np.ndarray]] = {}

    def add(self, array: np.ndarray) -> str:
        kind = array.dtype.kind if array.dtype.kind != "O" else f"O{len(self.kinds)}"
        arrays = self.kinds.setdefault(kind, [])
        arrays.append(array)
        return f"{self.name}__{kind}.column{len(arrays) - 1}"

    def parts(self) -> dict[str, Any]:
        return {f"{self.name}__{kind}": np.stack(arrays) for kind, arrays in self.kinds.items()}


def _numpy_parts(
    name: str, columns: Columns, vectors: tuple[str, VectorColumn] | None
) -> tuple[dict[str, Any], list[str], str]:
    stacks = _Stacks(name)
    select = []
    for column, (sql_type, values) in columns.items():
        array, nulls = _column_arrays(sql_type, values)
        value = f"CAST({stacks.add(array)} AS {sql_type})"
        if nulls is not None:
            value = f"CASE WHEN {stacks.add(nulls)} THEN NULL ELSE {value} END"
        select.append(f"{value} AS {column}")
    if vectors is None:
        parts = stacks.parts()
        return parts, select, _positional(list(parts))
    column, given = vectors
    rows, dims = given.matrix.shape
    row = stacks.add(np.arange(rows, dtype=np.int64))
    missing = stacks.add(np.asarray(list(given.missing), dtype=bool)) if any(given.missing) else None
    parts = stacks.parts()
    sources = _positional(list(parts))
    # The vectors as one flat column, each value with its row and place: a list per row, in order.
    # (DuckDB scans a 2-D array as one column per row of it: 384 columns bind far more slowly.)
    values, places = f"{name}__vv", f"{name}__vp"
    parts[values] = np.ascontiguousarray(given.matrix, dtype=np.float32).ravel()
    parts[places] = np.stack([np.repeat(np.arange(rows), dims), np.tile(np.arange(dims), rows)])
    sources += (
        f" LEFT JOIN (SELECT {places}.column0 AS row, list({values}.column0 ORDER BY {places}.column1) "
        f"AS vector FROM {_positional([values, places])} GROUP BY {places}.column0) {name}__vec "
        f"ON {name}__vec.row = {row} ORDER BY {row}"
    )
    value = f"{name}__vec.vector"
    if missing is not None:  # (a CASE can't yield a fixed-size array: choose the list, then cast)
        value = f"CASE WHEN {missing} THEN NULL ELSE {value} END"
    select.append(f"CAST({value} AS {given.sql_type()}) AS {column}")
    return parts, select, sources


_ARROW_TYPES = {
    "BIGINT": "int64",
    "INTEGER": "int32",
    "VARCHAR": "string",
    "DOUBLE": "float64",
    "BOOLEAN": "bool_",
    "DATE": "string",  # ISO text, cast by the view
}


def _arrow_type(sql_type: str) -> Any:
    import pyarrow as pa

    if sql_type == "VARCHAR[]":
        return pa.list_(pa.string())
    if sql_type == "TIMESTAMP":
        return pa.timestamp("us")
    return getattr(pa, _ARROW_TYPES[sql_type])()


def arrow_array(values: np.ndarray) -> pa.Array:
    """A 1-D NumPy array of numbers as an Arrow array, wrapping its buffer (no copy when contiguous).
    ``pa.array`` would check it for a masked array first, which imports ``numpy.ma`` (~12 ms a process)."""
    import pyarrow as pa

    if values.ndim != 1 or values.dtype.kind not in "iuf":  # (NumPy's bools are bytes, Arrow's bits)
        raise ValueError(f"expected a 1-D array of numbers, got {values.dtype} with {values.ndim} dims")
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _arrow_parts(
    name: str, columns: Columns, vectors: tuple[str, VectorColumn] | None
) -> tuple[dict[str, Any], list[str], str]:
    import pyarrow as pa

    arrays = {column: pa.array(list(values), _arrow_type(t)) for column, (t, values) in columns.items()}
    select = [f"CAST({name}__a.{column} AS {t}) AS {column}" for column, (t, _) in columns.items()]
    if vectors is not None:
        column, given = vectors
        rows, dims = given.matrix.shape
        flat = arrow_array(np.asarray(given.matrix, dtype=np.float32).ravel())
        # The rows' validity as a bitmap (from_arrays' ``mask`` would invert it with pyarrow.compute,
        # imported for that alone: ~35 ms before a build's keyword side is committed).
        valid = pa.array([not m for m in given.missing], pa.bool_()) if any(given.missing) else None
        validity = valid.buffers()[1] if valid is not None else None
        if given.fixed:
            arrays[column] = pa.Array.from_buffers(
                pa.list_(pa.float32(), dims), rows, [validity], children=[flat]
            )
        else:
            offsets = arrow_array(np.arange(0, (rows + 1) * dims, dims, dtype=np.int32))
            list_type = pa.list_(pa.float32())
            arrays[column] = pa.Array.from_buffers(
                list_type, rows, [validity, offsets.buffers()[1]], children=[flat]
            )
        select.append(f"CAST({name}__a.{column} AS {given.sql_type()}) AS {column}")
    return {f"{name}__a": pa.table(arrays).__arrow_c_stream__()}, select, f"{name}__a"
