"""A repeated query reuses its embedding; another model, or a query pushed out of the cache, runs the model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tests.conftest import SAMPLE_NOTES, HashEmbedder, write_files

from mnemo.config import load_settings
from mnemo.memory.service import MemoryService
from mnemo.search.query_vectors import QueryVectors
from mnemo.workspace.layout import Workspace


def test_a_repeated_query_is_embedded_once() -> None:
    embedder, cache = HashEmbedder(dims=8), QueryVectors()
    first = cache.vector(embedder, "billing database")
    again = cache.vector(embedder, "billing database")
    assert embedder.embedded == ["billing database"] and np.array_equal(first, again)
    assert np.array_equal(first, embedder.embed(["billing database"])[0])
    assert not first.flags.writeable, "shared between searches, so read-only"
    assert (cache.hits, cache.misses) == (1, 1)


def test_another_model_never_reuses_a_vector() -> None:
    cache = QueryVectors()
    one, other = HashEmbedder(dims=8, model="a"), HashEmbedder(dims=8, model="b")
    cache.vector(one, "coffee")
    cache.vector(other, "coffee")
    assert one.embedded == ["coffee"] and other.embedded == ["coffee"]


def test_least_recently_used_queries_are_dropped_past_capacity() -> None:
    embedder, cache = HashEmbedder(dims=8), QueryVectors(capacity=2)
    for query in ("a", "b", "a", "c", "a", "b"):
        cache.vector(embedder, query)
    assert embedder.embedded == ["a", "b", "c", "b"]  # "b" was the least recent when "c" came


def test_a_search_with_its_own_one_per_file_reuses_the_query_embedding(tmp_path: Path) -> None:
    """A search that asks for another ``one_per_file`` than the settings ranks with a searcher of its
    own, which shares the service's query embeddings (it embedded the query again every time before)."""
    write_files(tmp_path, SAMPLE_NOTES)
    settings, problems = load_settings(tmp_path)
    workspace = Workspace(tmp_path, ignore=[*settings.index.ignore, settings.index.dir])
    embedder = HashEmbedder(dims=16)
    memory = MemoryService(workspace, settings, embedder, problems)
    try:
        memory.sync(vectors="wait")
        query = "which database does billing use"
        for one_per_file in (True, True, None, not settings.search.one_per_file):
            assert memory.search(query, record=False, one_per_file=one_per_file).results
        assert embedder.embedded.count(query) == 1
    finally:
        memory.close()
