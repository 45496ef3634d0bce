"""Connections to the PostgreSQL index: the DSN comes from ``MNEMO_PG_DSN`` only.

The DSN (which may hold a password) is read from the environment, never from ``mnemo.toml``, a
command line or a log line; errors name the variable, not its value. Readers borrow connections from
a small pool and read inside a REPEATABLE READ, READ ONLY transaction (one consistent snapshot for as
long as they are held); the writer has its own connection.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format

from mnemo.errors import IndexUnavailable

DSN_ENV = "MNEMO_PG_DSN"
CONNECT_TIMEOUT_S = 10
POOL_IDLE = 16
"""Idle reader connections kept open per process."""


def dsn_from_env() -> str:
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise IndexUnavailable(
            f'[index] backend = "postgres" needs the database in the environment variable {DSN_ENV} '
            "(e.g. postgresql://user@host/db; the password in ~/.pgpass or PGPASSWORD)"
        )
    return dsn


def connect(dsn: str, *, vectors: bool = True) -> psycopg.Connection:
    """An autocommit connection (transactions are explicit), with pgvector's types when ``vectors``."""
    try:
        con = psycopg.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="mnemo"
        )
    except psycopg.OperationalError as exc:
        # psycopg's message names host and port, never the password; the DSN itself is not repeated.
        raise IndexUnavailable(f"cannot connect to the PostgreSQL index ({DSN_ENV}): {exc}") from exc
    except psycopg.Error:  # a malformed DSN: psycopg's message may quote it, password and all
        raise IndexUnavailable(f"{DSN_ENV} is not a valid PostgreSQL connection string") from None
    if vectors:
        register_vector(con)
        info = psycopg.types.TypeInfo.fetch(con, "vector")
        assert info is not None  # register_vector checked it
        con.adapters.register_loader(info.oid, _VectorText)
        con.adapters.register_loader(info.oid, _VectorBinary)
    return con


class _VectorText(Loader):
    """A ``vector`` as a float32 NumPy array (pgvector's own loader makes a ``Vector`` object)."""

    format = Format.TEXT

    def load(self, data: Buffer) -> np.ndarray:
        return np.array(bytes(data)[1:-1].split(b","), dtype=np.float32)


class _VectorBinary(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> np.ndarray:
        return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)


class ReaderPool:
    """Reader connections, each handed out for one consistent snapshot."""

    def __init__(self, dsn: str, settings: str = "") -> None:
        self._dsn = dsn
        self._begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" + (
            f"; {settings}" if settings else ""
        )
        """``BEGIN``, and ``settings`` (``SET LOCAL`` statements) in the same round trip."""
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[psycopg.Connection]:
        """A connection inside a read-only snapshot transaction, returned to the pool afterwards."""
        with self._lock:
            con = self._idle.pop() if self._idle else None
        if con is None or con.closed:
            con = connect(self._dsn)
        try:
            con.execute(self._begin)
            yield con
        finally:
            with contextlib.suppress(psycopg.Error):
                con.execute("ROLLBACK")
            self._give_back(con)

    def _give_back(self, con: psycopg.Connection) -> None:
        healthy = not con.closed and con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with self._lock:
            if healthy and not self._closed and len(self._idle) < POOL_IDLE:
                self._idle.append(con)
                return
        with contextlib.suppress(psycopg.Error):
            con.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for con in idle:
            with contextlib.suppress(psycopg.Error):
                con.close()
