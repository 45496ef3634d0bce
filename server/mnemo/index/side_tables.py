"""The index file's side tables, kept across rebuilds: the embedding cache (every model's vectors by text
hash, so a rebuild or a switch back to a model re-embeds nothing), the retrieval statistics (history
for hovers and lenses) and the feedback on chat turns. A mixin of :class:`mnemo.index.store.ChunkStore`, on its connection."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mnemo.index import feedback, repair
from mnemo.index.api import IndexIdentity
from mnemo.index.batches import VectorColumn, arrow_view, batch_view, row_columns
from mnemo.index.duck import read_closed
from mnemo.index.duckdb_native import duckdb, sql_strings

if TYPE_CHECKING:
    import pyarrow as pa

    from mnemo.index.pending import ReadAhead

log = logging.getLogger(__name__)


_RETRIEVAL_COLUMNS = [
    ("chunk_key", "VARCHAR"),
    ("path", "VARCHAR"),
    ("start_line", "INTEGER"),
    ("end_line", "INTEGER"),
    ("query", "VARCHAR"),
    ("searched_at", "TIMESTAMP"),
    *((name, "DOUBLE") for name in ("vector", "text", "decay", "weight", "score")),
    ("rank", "INTEGER"),
]
"""The ``retrievals`` table's columns, in its order."""


class SideTables:
    identity: IndexIdentity
    _read_ahead: ReadAhead
    """Pending chunks read ahead with the cache's vectors for them (the store makes it)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The store's connection (:class:`mnemo.index.store.ChunkStore` gives it)."""
        raise NotImplementedError

    def import_embedding_cache(self, old_path: Path) -> int:
        """Carry the embedding cache (every model's) over from a previous index file, when it can still
        be read (never loading its HNSW index)."""
        if not old_path.exists():
            return 0
        try:
            saved = repair.read_rows(old_path)
        except duckdb.Error as exc:
            log.info("previous index unreadable, its embedding cache is lost: %s", exc)
            return 0
        if saved is None or "embedding_cache" not in saved.tables:
            return 0
        try:
            return self._add_cache(saved.tables["embedding_cache"])
        except duckdb.Error as exc:
            log.info("previous index has no usable embedding cache: %s", exc)
            return 0

    def copy_embedding_cache(self, other: SideTables) -> int:
        """Copy the open index's embedding cache, every model's: a rebuild never re-embeds known text,
        and switching back to a model seen before costs nothing."""
        return self._add_cache(other.con.execute("SELECT * FROM embedding_cache").to_arrow_table())

    def _add_cache(self, table: pa.Table) -> int:
        with arrow_view(self.con, "cache", table):
            self.con.execute(
                "INSERT INTO embedding_cache SELECT * FROM cache "
                "QUALIFY row_number() OVER (PARTITION BY provider, model, hash) = 1"
            )
        return table.num_rows

    # -- embedding cache --------------------------------------------------------------------------
    def cached_embeddings(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        known = self._read_ahead.cached(hashes)  # read with the pending chunks, many batches at once
        return known if known is not None else self.cache_lookup(hashes)

    def cache_lookup(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cache's vectors for ``hashes`` (a scan of the table: it has no index)."""
        if not hashes:
            return {}
        rows = self.con.execute(
            "SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? "
            f"AND hash IN ({sql_strings(hashes)})",
            [self.identity.provider, self.identity.model],
        ).fetchall()
        return {digest: np.asarray(vector, dtype=np.float32) for digest, vector in rows}

    def cache_embeddings(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        digests = list(items)
        columns = {
            "provider": ("VARCHAR", [self.identity.provider] * len(digests)),
            "model": ("VARCHAR", [self.identity.model] * len(digests)),
            "hash": ("VARCHAR", digests),
        }
        matrix = np.stack([items[d] for d in digests]).astype(np.float32)
        vectors = ("embedding", VectorColumn(matrix, fixed=False))
        with batch_view(self.con, "cache", columns, vectors):
            self.con.execute("INSERT INTO embedding_cache SELECT * FROM cache")
        self._read_ahead.remember(items)

    # -- retrieval statistics (history, not cache: kept across rebuilds) ---------------------------
    def record_retrievals(self, rows: Sequence[tuple[object, ...]]) -> None:
        """Append search results to ``retrievals`` (values in the table's column order)."""
        if not rows:
            return
        with batch_view(self.con, "batch", row_columns(rows, _RETRIEVAL_COLUMNS)):
            self.con.execute("INSERT INTO retrievals SELECT * FROM batch")

    def retrieval_table(self) -> pa.Table:
        return self.con.execute("SELECT * FROM retrievals").to_arrow_table()

    def restore_retrievals(self, table: pa.Table) -> None:
        """Put back statistics saved from the generation this one replaced."""
        if table.num_rows:
            with arrow_view(self.con, "saved", table):
                self.con.execute("INSERT INTO retrievals SELECT * FROM saved")

    # -- feedback on chat turns (mnemo.index.feedback: history too) -------------------------------
    def retrieved_between(
        self, queries: Sequence[str], start: datetime, end: datetime
    ) -> list[feedback.RetrievedChunk]:
        return feedback.retrieved_between(self.con, queries, start, end)

    def replace_feedback(
        self, session_id: str, turn: int, signal: str, rows: Sequence[feedback.FeedbackRow]
    ) -> None:
        feedback.replace_turn(self.con, session_id, turn, signal, rows)

    def feedback_turns(self, session_id: str) -> set[tuple[int, str]]:
        return feedback.recorded_turns(self.con, session_id)

    @staticmethod
    def read_retrieval_table(path: Path) -> pa.Table | None:
        """The statistics of an index file that is not open (None when missing or unreadable)."""
        return read_closed(path, lambda con: con.execute("SELECT * FROM retrievals").to_arrow_table())
