"""Feedback on chat turns in the PostgreSQL engine: the ``feedback`` table, by namespace.

The rows, signals and tallies are DuckDB's (:mod:`mnemo.index.feedback`): one row per (chunk, turn,
signal), keyed by the chunk's stable key. Like ``retrievals``, the table is kept by namespace, not by
generation, so a rebuild keeps it, and every member of a team (every editor and gateway on the
namespace) shares it: a thumbs given in one person's chat panel counts in everyone's ranking when
``[search] usefulness_weight`` is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import psycopg

from mnemo.index.feedback import FeedbackRow, RetrievedChunk, Tally, weight_sql
from mnemo.index.pg_schema import SCHEMA

_ROW_TYPES = [
    ("namespace", "text"), ("chunk_key", "text"), ("path", "text"), ("start_line", "integer"),
    ("end_line", "integer"), ("session_id", "text"), ("turn", "integer"), ("useful", "boolean"),
    ("signal", "text"), ("given_at", "timestamp"), ("cited", "boolean"),
]  # fmt: skip


def retrieved_between(
    con: psycopg.Connection, namespace: str, queries: Iterable[str], start: datetime, end: datetime
) -> list[RetrievedChunk]:
    """Chunks that searches for any of ``queries`` returned between ``start`` and ``end`` (inclusive),
    each once, in the order first returned (as :func:`mnemo.index.feedback.retrieved_between`)."""
    wanted = sorted(set(queries))
    if not wanted:
        return []
    first = "ORDER BY searched_at, rank"
    rows = con.execute(
        f"SELECT chunk_key, (array_agg(path {first}))[1], (array_agg(start_line {first}))[1], "
        f"(array_agg(end_line {first}))[1], min(searched_at) AS first, min(rank) AS best "
        f"FROM {SCHEMA}.retrievals WHERE namespace = %s AND query = ANY(%s) "
        'AND searched_at BETWEEN %s AND %s GROUP BY chunk_key ORDER BY first, best, chunk_key COLLATE "C"',
        [namespace, wanted, start, end],
    ).fetchall()
    return [RetrievedChunk(key, path, int(s), int(e)) for key, path, s, e, _first, _best in rows]


def replace_turn(
    con: psycopg.Connection,
    namespace: str,
    session_id: str,
    turn: int,
    signal: str,
    rows: Sequence[FeedbackRow],
) -> None:
    """The rows of one turn's ``signal``, replacing earlier ones. The caller's transaction commits."""
    con.execute(
        f"DELETE FROM {SCHEMA}.feedback WHERE namespace = %s AND session_id = %s AND turn = %s AND signal = %s",
        [namespace, session_id, turn, signal],
    )
    if not rows:
        return
    values = [
        (namespace, r.chunk.key, r.chunk.path, r.chunk.start_line, r.chunk.end_line, r.session_id, r.turn,
         r.useful, r.signal, r.given_at, r.cited)
        for r in rows
    ]  # fmt: skip
    names = ", ".join(name for name, _ in _ROW_TYPES)
    arrays = ", ".join(f"%s::{kind}[]" for _, kind in _ROW_TYPES)
    con.execute(
        f"INSERT INTO {SCHEMA}.feedback({names}) SELECT * FROM unnest({arrays})",
        [list(column) for column in zip(*values, strict=True)],
    )


def recorded_turns(con: psycopg.Connection, namespace: str, session_id: str) -> set[tuple[int, str]]:
    """(turn, signal) pairs already recorded for a session (implicit signals are recorded once)."""
    rows = con.execute(
        f"SELECT DISTINCT turn, signal FROM {SCHEMA}.feedback WHERE namespace = %s AND session_id = %s",
        [namespace, session_id],
    ).fetchall()
    return {(int(t), str(s)) for t, s in rows}


def tallies(con: psycopg.Connection, namespace: str, keys: Sequence[str]) -> dict[str, Tally]:
    """The tally of each of ``keys`` that has feedback (as :func:`mnemo.index.feedback.tallies`)."""
    if not keys:
        return {}
    weight = f"{weight_sql()}::float8"
    rows = con.execute(
        "SELECT chunk_key, count(*) FILTER (WHERE useful), count(*) FILTER (WHERE NOT useful), "
        f"coalesce(sum({weight}) FILTER (WHERE useful), 0), coalesce(sum({weight}) FILTER (WHERE NOT useful), 0) "
        f"FROM {SCHEMA}.feedback WHERE namespace = %s AND chunk_key = ANY(%s) GROUP BY chunk_key",
        [namespace, list(keys)],
    ).fetchall()
    return {key: Tally(int(up), int(down), float(wup), float(wdown)) for key, up, down, wup, wdown in rows}
