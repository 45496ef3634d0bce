"""Rows handed to DuckDB (mnemo.index.batches): the NumPy and the Arrow path give the same view, and a
running server's small writes never load pyarrow."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import duckdb
import numpy as np
import pytest

from mnemo.index import batches
from mnemo.index.batches import VectorColumn, batch_view, row_columns

pytestmark = pytest.mark.timeout(120)

COLUMNS = [
    ("id", "BIGINT"),
    ("line", "INTEGER"),
    ("name", "VARCHAR"),
    ("day", "DATE"),
    ("tags", "VARCHAR[]"),
    ("at", "TIMESTAMP"),
    ("score", "DOUBLE"),
    ("flag", "BOOLEAN"),
]


def _rows(n: int) -> list[tuple[object, ...]]:
    return [
        (
            10_000_000_000 + i,
            i % 7,
            None if i % 5 == 0 else "" if i == 3 else f"name {i} — 我们",
            None if i % 3 else "2026-11-30",
            [] if i % 4 == 0 else [f"t{i}", "x"] if i > 1 else ["a", "b"],
            datetime(2026, 12, 1, 10, 0, 0, i % 1000),
            None if i % 6 == 0 else i / 3,
            i % 2 == 0,
        )
        for i in range(n)
    ]


def _view_rows(monkeypatch: pytest.MonkeyPatch, bulk_rows: int, rows: list[tuple[object, ...]]) -> list:
    monkeypatch.setattr(batches, "BULK_ROWS", bulk_rows)
    con = duckdb.connect()
    matrix = np.arange(len(rows) * 3, dtype=np.float32).reshape(len(rows), 3) / 7
    missing = [i % 4 == 1 for i in range(len(rows))]
    fixed = VectorColumn(matrix, missing=missing)
    listed = VectorColumn(matrix, missing=[i % 5 == 2 for i in range(len(rows))], fixed=False)
    with batch_view(con, "b", row_columns(rows, COLUMNS), ("v", fixed), build=True):
        kinds = [r[1] for r in con.execute("DESCRIBE b").fetchall()]  # (binds the view, reads no row)
        got = con.execute("SELECT * FROM b").fetchall()
    with batch_view(con, "c", {"id": ("BIGINT", [r[0] for r in rows])}, ("e", listed), build=True):
        kinds += [r[1] for r in con.execute("DESCRIBE c").fetchall()]
        got += con.execute("SELECT id, e FROM c").fetchall()
    assert not con.execute("SELECT * FROM duckdb_views() WHERE view_name IN ('b', 'c')").fetchall()
    return [kinds, got]


def test_numpy_and_arrow_paths_give_the_same_view(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(40)
    by_numpy = _view_rows(monkeypatch, 10**9, rows)
    by_arrow = _view_rows(monkeypatch, 1, rows)
    assert by_numpy == by_arrow
    kinds, got = by_numpy
    assert kinds[: len(COLUMNS) + 1] == [t for _, t in COLUMNS] + ["FLOAT[3]"]
    assert got[1][-1] is None and got[2][-1] == pytest.approx([6 / 7, 1.0, 8 / 7])
    assert got[0][2] is None and got[1][2] == "name 1 — 我们" and got[3][2] == "" and got[0][4] == []
    ended = [(1, 1, "ends in NUL\0", None, [], datetime(2026, 1, 1), 1.0, True)]  # (kept whole)
    assert _view_rows(monkeypatch, 10**9, ended)[1][0][2] == "ends in NUL\0"


def test_lists_of_one_length_stay_lists() -> None:
    con = duckdb.connect()
    with batch_view(con, "b", {"tags": ("VARCHAR[]", [["a", "b"], ["c", "d"]])}):
        assert con.execute("SELECT tags FROM b").fetchall() == [(["a", "b"],), (["c", "d"],)]


def test_an_empty_batch_inserts_nothing() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t(id BIGINT, name VARCHAR)")
    with batch_view(con, "b", row_columns([], [("id", "BIGINT"), ("name", "VARCHAR")])):
        con.execute("INSERT INTO t SELECT * FROM b")
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


@pytest.mark.parametrize("bulk_rows", [None, 1])
def test_a_running_server_edits_and_searches_without_pyarrow(tmp_path: Path, bulk_rows: int | None) -> None:
    """Importing pyarrow costs a server for good: a service over a built index takes new stamps of
    every file (a checkout touched them), edits (chunks, postings, vectors, file metadata, the embedding
    cache), adds a note of many chunks and records many searches' results without loading it. The build
    itself may, but never pyarrow's dataset layer (DuckDB imports it, with Parquet, ORC and cloud file
    systems, to scan a pyarrow object; mnemo hands it Arrow C streams). (``bulk_rows=1``: even when a batch
    of one row counts as a bulk one, a live index's writes stay off Arrow; before they did not.)"""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Tea: oolong.\n", encoding="utf-8")
    for i in range(30):
        (ws / "memory" / f"note-{i}.md").write_text(f"# Note {i}\n\nstaging deploy {i}\n", encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import os
        import sys
        from pathlib import Path
        from mnemo.config import load_settings
        from mnemo.memory.service import MemoryService
        from mnemo.workspace.layout import Workspace
        from tests.conftest import HashEmbedder

        root = Path({str(ws)!r})

        def service():
            settings, problems = load_settings(root)
            ws = Workspace(root, ignore=[*settings.index.ignore, settings.index.dir])
            return MemoryService(ws, settings, HashEmbedder(), problems)

        if sys.argv[1] == "build":
            built = service()
            built.sync()
            built.close()
            print(sorted(m for m in sys.modules if m.startswith("pyarrow") or m == "numpy.ma"))
            raise SystemExit(0)
        if {bulk_rows!r}:
            import mnemo.index.batches
            mnemo.index.batches.BULK_ROWS = {bulk_rows!r}
        memory = service()
        for path in root.rglob("*.md"):  # a checkout: new mtimes, the same content
            os.utime(path, (path.stat().st_atime, path.stat().st_mtime - 60))
        assert memory.sync().files_indexed == 0
        (root / "memory" / "edit.md").write_text("---\\ntags: [x]\\n---\\n# Edit\\n\\nquokka zeta\\n")
        memory.sync()
        found = memory.search("quokka zeta")
        assert found.results and found.results[0].path == "memory/edit.md", found
        for i in range(12):  # searches in quick succession: their results are recorded in one batch
            memory.search(f"staging deploy {{i}}", max_results=10, min_score=0.0)
        long = "".join(f"## Part {{i}}\\n\\nquokka part {{i}}\\n\\n" for i in range(40))
        (root / "memory" / "long.md").write_text(long)
        memory.sync()  # a file of many chunks
        (root / "memory" / "edit.md").unlink()
        memory.sync()
        memory.close()
        print(sorted(m for m in sys.modules if m.startswith("pyarrow")))
        """
    )
    root = Path(__file__).resolve().parents[2]
    loaded = {}
    for step in ("build", "serve"):  # (a process that built the index may have loaded pyarrow)
        done = subprocess.run(
            [sys.executable, "-c", script, step], capture_output=True, text=True, timeout=100, cwd=root
        )
        assert done.returncode == 0, done.stderr
        loaded[step] = done.stdout.strip()
    assert "'pyarrow.lib'" in loaded["build"] and "pyarrow.dataset" not in loaded["build"]
    # Nor what Arrow's compute functions by name and NumPy buffers wrapped as Arrow arrays spare a build.
    assert "'pyarrow.compute'" not in loaded["build"] and "'numpy.ma'" not in loaded["build"]
    assert loaded["serve"] == "[]"
    assert "pyarrow.dataset" not in loaded["serve"]


def test_arrow_array_wraps_numbers_and_refuses_what_it_cannot() -> None:
    pa = pytest.importorskip("pyarrow")
    for values in (
        np.arange(5, dtype=np.int64),
        np.linspace(0, 1, 4, dtype=np.float32),
        np.arange(9, dtype=np.int32)[::3],
    ):
        wrapped = batches.arrow_array(values)
        assert wrapped.type == pa.from_numpy_dtype(values.dtype) and wrapped.to_pylist() == values.tolist()
    for bad in (np.array([True, False]), np.zeros((2, 2)), np.array(["a"], dtype=object)):
        with pytest.raises(ValueError, match="1-D array of numbers"):
            batches.arrow_array(bad)


def test_a_batch_read_twice_is_a_table_when_it_goes_through_arrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Arrow stream is read once: a large batch whose statements read it twice (``read_once=False``,
    as the vector fill's join, delete and insert) is copied into a temporary table; read twice as a
    view, DuckDB says so instead of returning nothing."""
    monkeypatch.setattr(batches, "BULK_ROWS", 1)
    con = duckdb.connect()
    columns = {"id": ("BIGINT", [1, 2, 3])}
    with batch_view(con, "b", columns, read_once=False, build=True):
        assert con.execute("SELECT sum(id) FROM b").fetchone() == (6,)
        assert con.execute("SELECT count(*) FROM b").fetchone() == (3,)
    assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = 'b'").fetchall()
    with batch_view(con, "b", columns, build=True):
        assert con.execute("SELECT sum(id) FROM b").fetchone() == (6,)
        with pytest.raises(duckdb.InvalidInputException, match="consumed"):
            con.execute("SELECT count(*) FROM b")
