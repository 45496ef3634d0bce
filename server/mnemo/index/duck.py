"""DuckDB connections with the fts and vss extensions loaded from their PyPI packages (never downloaded)."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TypeVar

from mnemo.errors import IndexUnavailable
from mnemo.index.duckdb_native import duckdb
from mnemo.workspace.layout import shown_path

log = logging.getLogger(__name__)

_EXTENSIONS = {"fts": "duckdb_extension_fts", "vss": "duckdb_extension_vss"}


class _KnownAbsent:
    """Fails imports of modules known not to be installed at once, instead of walking sys.path.

    (A meta path finder needs only ``find_spec``; importing ``importlib.abc`` for its base class loaded
    ``importlib.resources`` and ``tempfile`` into every process that opens an index.)

    DuckDB's Python client tries ``import pandas`` twice for every parameter value it converts (and
    per element of a list): a 384-float query vector meant ~770 failed imports, about 0.3 s a search;
    each ``datetime.date`` parameter tries ``import dateutil`` likewise.
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


_ABSENT = frozenset(name for name in ("pandas", "dateutil") if importlib.util.find_spec(name) is None)
if _ABSENT:  # dateutil: tried (twice) for every DATE parameter, i.e. for every chunk a sync writes
    sys.meta_path.insert(0, _KnownAbsent(_ABSENT))


@cache
def extension_path(name: str) -> Path:
    """The extension binary shipped by the ``duckdb-extension-<name>`` wheel for this DuckDB version."""
    package = _EXTENSIONS[name]
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise IndexUnavailable(
            f"the DuckDB '{name}' extension package ({package.replace('_', '-')}) is not installed; "
            "run `make install`"
        ) from exc
    base = Path(module.__file__ or "").parent / "extensions" / f"v{duckdb.__version__}"
    candidates = sorted(base.glob(f"{name}.duckdb_extension"))
    if not candidates:
        raise IndexUnavailable(
            f"no '{name}' extension for DuckDB {duckdb.__version__} under {base}; "
            f"install {package.replace('_', '-')}=={duckdb.__version__}"
        )
    return candidates[0]


def load_extension(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Load ``fts`` or ``vss`` from its PyPI package into ``con`` (loading twice is harmless)."""
    con.execute(f"LOAD '{extension_path(name)}'")


def connect(
    path: Path | str, *, read_only: bool = False, vss: bool = True, threads: int = 2
) -> duckdb.DuckDBPyConnection:
    """Open a database, with vss loaded offline; autoinstall is off so nothing is fetched.

    ``vss=False`` leaves an HNSW index unbound (never loaded): how a damaged one is read around
    (see :mod:`mnemo.index.repair`). ``threads=1`` for bulk writes: a second DuckDB thread spends more
    CPU time than it saves on inserts of a few thousand rows (a full build used 1.3x the CPU with two).
    The fts extension is not loaded: mnemo makes and fills its tables itself, and a build and every
    reader stem in Python; a writer loads it for its ``stem`` at its first edit (:func:`load_extension`;
    loading it, mostly checking its signature, costs ~40 ms)."""
    name = str(path)
    why = "holds '?'" if "?" in name else None  # DuckDB reads what follows a '?' as options (its log file)
    if why is None and not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            why = "is not valid UTF-8"
    if why is not None:
        raise IndexUnavailable(
            f"the index cannot be in a folder whose path {why} ({shown_path(name)}): rename the folder, or set "
            "[index] dir in mnemo.toml to a path without it"
        )
    con = duckdb.connect(
        str(path),
        read_only=read_only,
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "threads": threads,
        },
    )
    try:
        if vss:
            load_extension(con, "vss")
            con.execute("SET hnsw_enable_experimental_persistence = true")
        if not read_only:
            # A writer lives long (a server): let DuckDB's allocator hand freed memory back to the
            # system in the background. Without, what a query's hash tables used stays resident (the
            # postings load at 2,000 notes kept ~30 MB; a commit or checkpoint, more).
            con.execute("SET allocator_background_threads = true")
    except Exception:
        con.close()
        raise
    return con


RELEASE_MARGIN = 4 << 20
"""Bytes of the file's blocks :func:`release_buffers` leaves DuckDB beyond its other memory."""


def memory_limit(con: duckdb.DuckDBPyConnection) -> str:
    """DuckDB's memory limit as it shows it (e.g. ``18.8 GiB``)."""
    (limit,) = con.execute("SELECT current_setting('memory_limit')").fetchone() or ("",)
    return str(limit)


def release_buffers(con: duckdb.DuckDBPyConnection, limit: str) -> bool:
    """Evict the blocks of the database file DuckDB keeps in its buffer pool once read; they are read
    again from the file when a query needs them.

    DuckDB keeps every block it read until its memory limit (80% of the machine's memory) is reached. A
    server reads the whole chunk table once, to load the vectors and rows it then serves from memory
    (:mod:`mnemo.index.vector_cache`, :mod:`mnemo.index.record_cache`), and a checkpoint reads what it
    rewrites: ~20 MB of blocks at 2,000 notes that no search reads again. Lowering the limit evicts down
    to it (DuckDB raises instead when it cannot, and keeps the limit); ``limit`` is then set again: the
    one :func:`memory_limit` read before the first release, as DuckDB shows it (to 0.1 of its unit;
    ``RESET`` restores the setting but not the buffer pool's limit in DuckDB 1.5, and a limit read back
    after being set is shown rounded down, so reading it each time would lower it a little each time).
    The caller holds the connection alone: a query running meanwhile would have to fit in the lower
    limit.

    Rows waiting for a checkpoint stay where they are: the lower limit still counts them (and every
    buffer but the file's blocks), and DuckDB evicts the file's blocks first (they are only dropped;
    its managed buffers, which those rows are in, would have to be written to a temporary file), from
    DuckDB 1.1 on (``tests/unit/test_release_buffers.py`` checks that nothing is spilled). A server's
    start indexes what changed since it last ran and loads its caches before that checkpoint.
    False when there was nothing to release."""
    used = dict(con.execute("SELECT tag, memory_usage_bytes FROM duckdb_memory()").fetchall())
    if used.get("BASE_TABLE", 0) <= RELEASE_MARGIN:
        return False
    others = sum(int(size) for tag, size in used.items() if tag != "BASE_TABLE")
    try:
        con.execute(f"SET memory_limit = '{others + RELEASE_MARGIN}B'")
    except duckdb.Error as exc:  # (OutOfMemoryException: not enough could be evicted; nothing changed)
        log.debug("DuckDB's buffers not released: %s", exc)
    finally:
        con.execute(f"SET memory_limit = '{limit}'")
    return True


T = TypeVar("T")

WORK_HEADROOM = 8 << 20
"""Bytes :func:`leanly` lets DuckDB's buffers grow by during a piece of work."""


def leanly(con: duckdb.DuckDBPyConnection, limit: str, work: Callable[[], T]) -> T:
    """``work`` with DuckDB's memory limit lowered to what it holds plus :data:`WORK_HEADROOM`, then set
    back to ``limit`` (as :func:`release_buffers` does): DuckDB evicts the file's blocks it is done with
    as it reads on, instead of keeping every one until its usual limit. When that is not enough (DuckDB
    raises out of memory), ``work`` runs again under the usual limit. The caller holds the connection
    alone. Used for a checkpoint, which reads the blocks of what it rewrites (after four edits at 2,000
    notes +27 to +34 MB at its peak, +17 MB so; ``python benchmarks/bench_server_steps.py --edits 4``),
    and for loading the writer's caches."""
    used = sum(
        int(size) for (size,) in con.execute("SELECT memory_usage_bytes FROM duckdb_memory()").fetchall()
    )
    try:
        con.execute(f"SET memory_limit = '{used + WORK_HEADROOM}B'")
        try:
            return work()
        finally:
            con.execute(f"SET memory_limit = '{limit}'")
    except duckdb.OutOfMemoryException as exc:
        log.debug("under a lower memory limit: %s; again under the usual one", exc)
    return work()


def lean_checkpoint(con: duckdb.DuckDBPyConnection, limit: str) -> None:
    """``CHECKPOINT`` under :func:`leanly`, on one DuckDB thread (then set back): a second thread
    rewrites another part of the table at the same time, with its own buffers outside the pool. At 2,000
    notes after four edits, the checkpoint's peak over the RSS before it was +20 to +21 MB on two threads
    and +17 to +19 MB on one (one-off script, three pairs); it runs in a quiet moment, so its time matters
    less."""
    (threads,) = con.execute("SELECT current_setting('threads')").fetchone() or (2,)
    con.execute("SET threads = 1")
    try:
        leanly(con, limit, lambda: con.execute("CHECKPOINT"))
    finally:
        con.execute(f"SET threads = {int(threads)}")


def read_closed(path: Path, read: Callable[[duckdb.DuckDBPyConnection], T]) -> T | None:
    """What ``read`` returns from the index file ``path`` that no one has open, read-only (None when
    the file is missing or unreadable, or ``read`` raised a DuckDB error)."""
    if not path.exists():
        return None
    try:
        # never loads (or replays into) its HNSW index; plain tables need no fts extension either
        con = connect(path, read_only=True, vss=False, threads=1)
    except (duckdb.Error, OSError):
        return None
    try:
        return read(con)
    except duckdb.Error:
        return None
    finally:
        con.close()
