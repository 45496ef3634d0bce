"""DuckDB's compiled engine, imported without the ``duckdb`` package's Python layer around it.

The ``duckdb`` package re-exports the compiled module ``_duckdb`` (shipped in the same wheel, pinned in
pyproject.toml), then reads its own version through :mod:`importlib.metadata`, which walks every
installed distribution, and builds DB-API type objects and value classes. mnemo uses none of that layer:
``connect``, the connection class and the exception classes are ``_duckdb``'s own objects, the very ones
the package re-exports (``duckdb.Error is _duckdb.Error``), and ``__version__`` is the same string. The
layer cost ~50 ms of every one-shot ``mnemo search`` (~0.27 s in all), so every module of mnemo imports
DuckDB from here; tests/unit/test_cli_daemon.py keeps a one-shot search from importing the package, and
tests/test_architecture.py every other module from importing DuckDB but through here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

# Loaded with lazy binding: CPython opens extension modules with RTLD_NOW, which binds every function
# the 60 MB library calls through its PLT before the first call (52,367 relocations against 27,073 lazily);
# lazy binding binds a function at its first call, so a one-shot search pays only for those it reaches
# (3.5% fewer instructions; docs/benchmarks.md, "Tenth round"). Nothing else changes: a missing symbol
# would fail at its call instead of at the import, and the wheel is built against the same glibc.
_FLAGS = sys.getdlopenflags()
sys.setdlopenflags((_FLAGS & ~os.RTLD_NOW) | os.RTLD_LAZY)
try:
    import _duckdb as duckdb
finally:
    sys.setdlopenflags(_FLAGS)

__all__ = ["duckdb", "is_lock_error", "sql_double", "sql_ids", "sql_strings"]

_LOCK_MESSAGES = ("could not set lock on file", "conflicting lock")


def is_lock_error(exc: BaseException) -> bool:
    """DuckDB's "Could not set lock on file ...: Conflicting lock is held in ..." (another process
    holds the index). Only that message: a corrupt file's "checksum ... in block at location" is
    damage to repair, not a lock to wait for (a plain "lock" in the text matched its "block")."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.IOException) and any(m in text for m in _LOCK_MESSAGES)


# Values written into SQL as constants. DuckDB's client converts a list parameter element by element
# (~25 µs an integer, ~50 µs a string), and a constant list is planned and scanned faster than a join.
def sql_ids(ids: Iterable[int]) -> str:
    """Integers as a comma-separated list of constants (``IN (...)``, ``[...]``)."""
    return ", ".join(str(int(i)) for i in ids)


def sql_strings(values: Iterable[str]) -> str:
    """Strings as a comma-separated list of string constants (quotes doubled: any text is safe)."""
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def sql_double(value: float) -> str:
    """A float as a DOUBLE constant (a plain ``1.5`` is a DECIMAL to DuckDB, and slow to compute with)."""
    return f"{value!r}::DOUBLE"


def id_ranges(count: int, low: int, high: int, per_range: int) -> list[tuple[int, int]]:
    """Half-open ranges of ids [start, stop) covering ``low``..``high`` with ~``per_range`` of ``count``
    rows each on average: a whole table read range by range, so DuckDB streams its scan instead of
    holding the whole result (and the caller every row's tuple) at once."""
    if count <= 0:
        return []
    step = -(-(high - low + 1) // -(-count // per_range))
    return [(start, start + step) for start in range(low, high + 1, step)]
