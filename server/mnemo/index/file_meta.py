"""Per-file metadata for search filters: front-matter tags, project, type and date (table ``file_meta``).

The table sits next to ``files`` and is created ``IF NOT EXISTS`` on every open, so an index built by an
older version keeps its schema and identity (no rebuild). A file's row is written with its chunks; a
file indexed before this table existed gets its row on the next sync (:func:`known`), and a salvage
that drops the table is refilled the same way. Rows are a cache of the Markdown, like the chunks.

Front matter read (:mod:`mnemo.markdown.frontmatter`): ``tags`` (or ``tag``) as a YAML list, an inline
``[a, b]`` list or a comma-separated string (lowercased, a leading ``#`` dropped); ``project`` and
``type`` as strings; ``date`` as ``YYYY-MM-DD`` (the date of an undated file for ``since``/``until``).
"""

from __future__ import annotations

import re
from datetime import date

from mnemo.index.batches import Columns, batch_view
from mnemo.index.duckdb_native import duckdb
from mnemo.index.writer_api import FileMeta
from mnemo.markdown.frontmatter import parse_front_matter

__all__ = ["DDL", "FileMeta", "delete", "ensure", "extract", "known", "split_tags", "write", "write_many"]

DDL = "CREATE TABLE IF NOT EXISTS file_meta(path VARCHAR, tags VARCHAR[], project VARCHAR, type VARCHAR, day DATE)"
_DAY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def split_tags(value: str) -> tuple[str, ...]:
    """``"[Billing, #decisions]"`` -> ``("billing", "decisions")`` (order kept, duplicates dropped)."""
    inner = value.strip().removeprefix("[").removesuffix("]")
    out: list[str] = []
    for part in inner.split(","):
        tag = part.strip().strip("\"'").lstrip("#").strip().lower()
        if tag and tag not in out:
            out.append(tag)
    return tuple(out)


def _day(value: str | None) -> str | None:
    m = _DAY_RE.match((value or "").strip().strip("\"'"))
    if m is None:
        return None
    try:
        return date(int(m.group(1)), int(m.group(2)), int(m.group(3))).isoformat()
    except ValueError:
        return None


def extract(text: str | None, *, front_matter: bool = True) -> FileMeta:
    """The metadata of a file's text (nothing for a transcript, ``front_matter=False``, or no text)."""
    if text is None or not front_matter:
        return FileMeta()
    data = parse_front_matter(text).data
    tags = split_tags(data.get("tags", data.get("tag", "")))
    project = (data.get("project") or "").strip() or None
    kind = (data.get("type") or "").strip() or None
    return FileMeta(tags, project, kind, _day(data.get("date")))


def ensure(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(DDL)


def write(con: duckdb.DuckDBPyConnection, path: str, meta: FileMeta) -> None:
    """Replace ``path``'s row (inside the caller's transaction), unless it holds ``meta`` already: most
    edits leave a note's front matter as it was, and DuckDB writes a changed row with a list column as a
    new row, which holds a 256 KB block a column (3 MB) from the first edit to the next checkpoint."""
    rows = con.execute("SELECT tags, project, type, day FROM file_meta WHERE path = ?", [path]).fetchall()
    day = date.fromisoformat(meta.day) if meta.day else None
    if rows == [(list(meta.tags), meta.project, meta.type, day)]:
        return
    delete(con, path)
    con.execute(
        "INSERT INTO file_meta VALUES (?, ?::VARCHAR[], ?, ?, CAST(? AS DATE))",
        [path, list(meta.tags), meta.project, meta.type, meta.day],
    )


def write_many(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, FileMeta]]) -> None:
    """Rows of a full build (a new file: nothing to replace)."""
    if rows:
        columns: Columns = {
            "path": ("VARCHAR", [path for path, _ in rows]),
            "tags": ("VARCHAR[]", [list(m.tags) for _, m in rows]),
            "project": ("VARCHAR", [m.project for _, m in rows]),
            "type": ("VARCHAR", [m.type for _, m in rows]),
            "day": ("DATE", [m.day for _, m in rows]),
        }
        with batch_view(con, "staged", columns, build=True):
            con.execute("INSERT INTO file_meta SELECT * FROM staged")


def delete(con: duckdb.DuckDBPyConnection, path: str) -> None:
    con.execute("DELETE FROM file_meta WHERE path = ?", [path])


def known(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Paths that have a row."""
    return frozenset(row[0] for row in con.execute("SELECT path FROM file_meta").fetchall())
