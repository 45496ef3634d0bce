"""mnemo.index.duckdb_native: DuckDB's compiled engine loaded with lazy symbol binding, in a fresh
interpreter (this one has DuckDB loaded already)."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import os, sys
before = sys.getdlopenflags()
seen = []
real = sys.setdlopenflags
sys.setdlopenflags = lambda flags: (seen.append(flags), real(flags))[1]
from mnemo.index.duckdb_native import duckdb
assert "_duckdb" in sys.modules
assert sys.getdlopenflags() == before, (before, sys.getdlopenflags())  # given back after the import
assert seen[0] & os.RTLD_LAZY and not seen[0] & os.RTLD_NOW, seen  # the engine was opened lazily
print("ok")
"""


def test_duckdb_is_opened_with_lazy_binding_and_the_flags_are_given_back() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]


def test_the_engine_is_loaded_with_lazy_binding_and_stays_usable() -> None:
    """With RTLD_LAZY a symbol is bound at its first call: a query, an error and an extension-free
    connection all still work (a symbol the library lacked would fail here, not at the import)."""
    script = """
import sys
from mnemo.index.duckdb_native import duckdb
con = duckdb.connect(":memory:", config={"threads": 1})
con.execute("CREATE TABLE t AS SELECT range AS i, 'x' || range AS s FROM range(5000)")
assert con.execute("SELECT count(*), max(s) FROM t").fetchone() == (5000, "x999")
try:
    con.execute("SELECT * FROM missing_table")
except duckdb.CatalogException as exc:
    print("caught", type(exc).__name__)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "caught CatalogException"
