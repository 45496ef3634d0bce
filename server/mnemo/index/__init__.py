"""The index: a rebuildable DuckDB cache of the workspace (chunks, BM25 tables, vectors)."""
