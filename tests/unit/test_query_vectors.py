"""A repeated query reuses its embedding; another model, or a query pushed out of the cache, runs the model."""

from __future__ import annotations

import numpy as np
from tests.conftest import HashEmbedder

from mnemo.search.query_vectors import QueryVectors


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
