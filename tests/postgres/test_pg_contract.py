"""The index read API's contract tests (tests/unit/test_index_reader.py) against the PostgreSQL engine.

The same test functions run here with ``reader_factory`` indexing through
:class:`mnemo.index.pg_indexer.PgIndexer` into the session's throwaway cluster, one namespace per
workspace. Each workspace's model name is its own, so the embedding cache (shared by every namespace,
by design) does not fill one test's pending chunks with another test's vectors.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemo.config import ChunkingSettings, IndexSettings
from mnemo.embeddings import Embedder
from mnemo.index.pg_indexer import PgIndexer
from mnemo.workspace.layout import Workspace
from tests.unit import test_index_reader as contract
from tests.unit.test_index_reader import *  # noqa: F403 - the contract tests, collected again here

del test_reading_with_a_timeout_answers_none_while_a_swap_holds_the_index  # noqa: F821 - DuckDB's own

_workspaces = itertools.count()


@contextlib.contextmanager
def postgres_engine(
    request: pytest.FixtureRequest, root: Path, embedder: Embedder, vectors: contract.Vectors
) -> Iterator[contract.Built]:
    namespace = f"contract-{next(_workspaces)}-{request.node.name[:40]}"
    if embedder.dims:
        embedder.model = f"{embedder.model}@{namespace}"  # type: ignore[misc]  # HashEmbedder's is plain
    indexer = PgIndexer(
        Workspace(root, ignore=[".mnemo"]),
        embedder,
        IndexSettings(),
        ChunkingSettings(),
        dsn=request.getfixturevalue("pg_dsn"),
        namespace=namespace,
    )
    try:
        indexer.sync(vectors=vectors)
        assert indexer.store is not None
        yield contract.Built(indexer.store, indexer.reading)  # type: ignore[arg-type]
    finally:
        indexer.close()


@pytest.fixture
def reader_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[contract.Factory]:
    with contextlib.ExitStack() as stack:
        yield contract.Factory(request, tmp_path, postgres_engine, stack)
