"""The memory engine's front door: the service, retrieval records, citations, limits, background vectors
and the index shared across processes."""
