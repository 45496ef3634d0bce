"""mnemo: a memory-first assistant whose memory is plain Markdown, indexed into DuckDB."""

__version__ = "0.1.0"
