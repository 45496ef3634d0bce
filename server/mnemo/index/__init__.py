"""The index: a rebuildable DuckDB cache of the workspace (chunks, BM25 tables, vectors)."""

INDEX_FILE = "index.duckdb"
"""The index's file name in the index folder (``[index] dir``); here so that finding it imports nothing."""
