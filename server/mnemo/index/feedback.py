"""The ``feedback`` table: whether the chat turns that used a chunk went well, next to ``retrievals``.

One row per (chunk, turn, signal): ``useful`` true or false. Signals: ``explicit`` (a thumbs up or down
from an editor panel, ``:Mnemo feedback``, ``mnemo feedback``), ``kept`` / ``corrected`` (the user's
next message went on, or said the answer was wrong), ``tool`` (a tool call in that turn succeeded).
Rows are keyed by the chunk's stable key, so they survive a rebuild the way retrieval statistics do
(the caller saves :func:`saved_table` before a rebuild and puts it back with :func:`restore`).

Created on first write (an index from before this table is never rebuilt for it); reads of an index
without it find no feedback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rows cross the index-sharing socket: importing them loads no engine
    import pyarrow as pa

    from mnemo.index.duckdb_native import duckdb

DDL = (
    "CREATE TABLE IF NOT EXISTS feedback(chunk_key VARCHAR, path VARCHAR, start_line INTEGER, "
    "end_line INTEGER, session_id VARCHAR, turn INTEGER, useful BOOLEAN, signal VARCHAR, given_at TIMESTAMP, "
    "cited BOOLEAN)"
)


@dataclass(frozen=True)
class RetrievedChunk:
    """A chunk a search returned (from ``retrievals``), as the turn saw it."""

    key: str
    path: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class FeedbackRow:
    chunk: RetrievedChunk
    session_id: str
    turn: int
    useful: bool
    signal: str
    given_at: datetime
    cited: bool | None = None
    """Whether the turn's answer cited the chunk; None when it cited nothing at all."""


UNCITED = 0.25
"""How much feedback counts for a chunk recalled with others when the answer cited only those others."""

SIGNAL_WEIGHTS: dict[str, float] = {"explicit": 1.0, "tool": 0.5, "corrected": 0.5, "kept": 0.25}
"""How much one signal counts in the usefulness prior: a thumbs is what the user meant; a conversation
that simply went on says little (it would favour whatever is retrieved often)."""


@dataclass(frozen=True)
class Tally:
    """How often the turns that used a chunk went well (``useful``) or not (``not_useful``), every
    signal counted once; ``weighted_*``: the same with :data:`SIGNAL_WEIGHTS` (what ranking uses)."""

    useful: int = 0
    not_useful: int = 0
    weighted_useful: float = 0.0
    weighted_not_useful: float = 0.0

    @property
    def total(self) -> int:
        return self.useful + self.not_useful


def weight_sql() -> str:
    """How much one row counts in a tally (:data:`SIGNAL_WEIGHTS`, :data:`UNCITED`), in SQL over the
    ``feedback`` table's columns (both engines' tallies)."""
    # float8 (DOUBLE to DuckDB, double precision to PostgreSQL): a bare 0.5 is a DECIMAL, or a numeric,
    # whose sums come back as Python Decimals (DuckDB's client imports the decimal module for them).
    signals = (
        "CASE signal "
        + " ".join(f"WHEN '{s}' THEN {w!r}::float8" for s, w in SIGNAL_WEIGHTS.items())
        + " ELSE 0 END"
    )
    return f"(({signals}) * (CASE WHEN cited = false THEN {UNCITED!r}::float8 ELSE 1 END))"


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(DDL)


def retrieved_between(
    con: duckdb.DuckDBPyConnection, queries: Iterable[str], start: datetime, end: datetime
) -> list[RetrievedChunk]:
    """Chunks that searches for any of ``queries`` returned between ``start`` and ``end`` (inclusive),
    each once, in the order first returned."""
    wanted = sorted(set(queries))
    if not wanted:
        return []
    rows = con.execute(
        "SELECT chunk_key, arg_min(path, searched_at), arg_min(start_line, searched_at), "
        "arg_min(end_line, searched_at), min(searched_at) AS first, min(rank) AS best FROM retrievals "
        "WHERE query IN (SELECT unnest(?::VARCHAR[])) AND searched_at BETWEEN ? AND ? "
        "GROUP BY chunk_key ORDER BY first, best, chunk_key",
        [wanted, start, end],
    ).fetchall()
    return [RetrievedChunk(key, path, int(s), int(e)) for key, path, s, e, _first, _best in rows]


def replace_turn(
    con: duckdb.DuckDBPyConnection, session_id: str, turn: int, signal: str, rows: Sequence[FeedbackRow]
) -> None:
    """The rows of one turn's ``signal``, replacing earlier ones (a second thumbs on the same answer
    changes the first). The caller commits."""
    ensure(con)
    con.execute(
        "DELETE FROM feedback WHERE session_id = ? AND turn = ? AND signal = ?", [session_id, turn, signal]
    )
    if not rows:
        return
    con.executemany(
        "INSERT INTO feedback VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.chunk.key,
                r.chunk.path,
                r.chunk.start_line,
                r.chunk.end_line,
                r.session_id,
                r.turn,
                r.useful,
                r.signal,
                r.given_at,
                r.cited,
            )
            for r in rows
        ],
    )


def recorded_turns(con: duckdb.DuckDBPyConnection, session_id: str) -> set[tuple[int, str]]:
    """(turn, signal) pairs already recorded for a session (implicit signals are recorded once)."""
    from mnemo.index.duckdb_native import duckdb

    try:
        rows = con.execute("SELECT DISTINCT turn, signal FROM feedback WHERE session_id = ?", [session_id])
    except duckdb.CatalogException:  # no feedback yet: the table comes with the first
        return set()
    return {(int(t), str(s)) for t, s in rows.fetchall()}


def tallies(con: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> dict[str, Tally]:
    """The tally of each of ``keys`` that has feedback (none in an index without the table)."""
    from mnemo.index.duckdb_native import duckdb, sql_strings

    if not keys:
        return {}
    weight = weight_sql()
    try:
        rows = con.execute(
            "SELECT chunk_key, count(*) FILTER (WHERE useful), count(*) FILTER (WHERE NOT useful), "
            f"coalesce(sum({weight}) FILTER (WHERE useful), 0), "
            f"coalesce(sum({weight}) FILTER (WHERE NOT useful), 0) "
            f"FROM feedback WHERE chunk_key IN ({sql_strings(keys)}) GROUP BY chunk_key"
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {key: Tally(int(up), int(down), float(wup), float(wdown)) for key, up, down, wup, wdown in rows}


def saved_table(con: duckdb.DuckDBPyConnection) -> pa.Table | None:
    from mnemo.index.duckdb_native import duckdb

    if not isinstance(con, duckdb.DuckDBPyConnection):  # another engine (PostgreSQL) keeps no feedback
        return None
    try:
        return con.execute("SELECT * FROM feedback").to_arrow_table()
    except duckdb.CatalogException:
        return None


def restore(con: duckdb.DuckDBPyConnection, table: pa.Table | None) -> None:
    """Put back rows saved from the generation this one replaced."""
    if table is None or not table.num_rows:
        return
    ensure(con)
    from mnemo.index.batches import arrow_view

    with arrow_view(con, "saved", table):
        con.execute("INSERT INTO feedback SELECT * FROM saved")


def read_table(path: Path) -> pa.Table | None:
    """The feedback of an index file that is not open (None when missing, unreadable or without any)."""
    from mnemo.index.duck import read_closed

    return read_closed(path, saved_table)
