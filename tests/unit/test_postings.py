"""The in-memory postings give exactly the BM25 of the fts tables, through edits and rollbacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mnemo.index import fts
from mnemo.text.terms import query_terms

QUERIES = [
    "billing database",
    "PostgreSQL row-level security",
    "tomatoes basil sun",
    "服务器集群部署",
    "数据库迁移",
    "what does the staging deploy lesson say",
    "nothing-matches-this zzzz",
    "review",
]


def _compare(store: Any, queries: list[str] = QUERIES) -> None:
    reader = store.reader()
    try:
        for query in queries:
            terms = query_terms(query)
            expected = {i: (b, c, t) for i, b, c, t in fts.search(reader, terms, limit=10_000)}
            got = {i: (b, c, t) for i, b, c, t in store.postings.search(reader, terms, limit=10_000)}
            assert got.keys() == expected.keys(), query
            for cid, values in expected.items():
                assert got[cid] == pytest.approx(values, rel=1e-9), (query, cid)
            top = store.postings.search(reader, terms, limit=2)
            assert [b for _, b, _, _ in top] == pytest.approx(
                sorted((b for b, _, _ in expected.values()), reverse=True)[:2]
            )
            some = list(expected)[::2]
            only = {i: b for i, b, _, _ in store.postings.search(reader, terms, limit=5, only_ids=some)}
            assert only == pytest.approx({i: expected[i][0] for i in some})
    finally:
        reader.close()


def test_postings_match_the_fts_tables_through_edits(sample_workspace: Path, services_factory: Any) -> None:
    services = services_factory(sample_workspace)
    memory = services.memory
    memory.sync()
    store = memory.indexer.store
    _compare(store)
    assert store.postings._loaded

    (sample_workspace / "memory" / "2026-11-20.md").write_text(
        "# 2026-11-20\n\n- Billing moved to a new database cluster; review the migration.\n", encoding="utf-8"
    )
    (sample_workspace / "memory" / "gardening.md").write_text("# Gardening\n\nOnly basil this year.\n")
    (sample_workspace / "memory" / "中文笔记.md").unlink()
    memory.sync()
    assert store.postings._loaded and store.postings._overlay_rows > 0, "edits applied as deltas"
    _compare(store)
    memory.schedule_buffer("MEMORY.md", "# Memory\n\n- Billing uses SQLite now.\n", delay_s=0)
    assert memory.apply_pending(timeout_s=10)
    _compare(store, [*QUERIES, "sqlite billing"])
    hits = memory.search("sqlite").results
    assert hits and hits[0].path == "MEMORY.md"


def test_ids_spread_wider_than_the_postings_are_scored_by_sorting_with_the_same_results(
    sample_workspace: Path, services_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The postings are summed into arrays indexed by chunk id; past :data:`SORTED_PAST` (an index with a
    long history of edits, its ids far apart) they are sorted instead, with the same scores and order."""
    from mnemo.index import postings

    services = services_factory(sample_workspace)
    services.memory.sync()
    store = services.memory.indexer.store
    dense = {q: store.postings.search(store.con, query_terms(q), limit=3) for q in QUERIES}
    monkeypatch.setattr(postings, "SORTED_PAST", 0)
    monkeypatch.setattr(postings, "DENSE_FACTOR", 0)
    monkeypatch.setattr(postings, "best_of_dense", None)  # not used on this path
    _compare(store)
    for query, top in dense.items():
        assert store.postings.search(store.con, query_terms(query), limit=3) == top, query


def test_a_rolled_back_edit_leaves_the_postings_alone(sample_workspace: Path, services_factory: Any) -> None:
    services = services_factory(sample_workspace)
    services.memory.sync()
    store = services.memory.indexer.store
    _compare(store)
    ids = [row[0] for row in store.con.execute("SELECT id FROM chunks WHERE path = 'MEMORY.md'").fetchall()]
    with pytest.raises(RuntimeError), store.transaction():
        store.delete_chunks(ids)
        raise RuntimeError("simulated failure mid-edit")
    _compare(store)
    assert services.memory.search("PostgreSQL").results[0].path == "MEMORY.md"


def test_a_large_change_reloads_instead_of_growing_the_overlay(
    make_workspace: Any, services_factory: Any
) -> None:
    root = make_workspace({f"memory/n{i}.md": f"# N{i}\n\nword{i} shared\n" for i in range(20)})
    services = services_factory(root)
    services.memory.sync()
    store = services.memory.indexer.store
    _compare(store, ["shared", "word3"])
    for i in range(20, 40):
        (root / "memory" / f"n{i}.md").write_text(f"# N{i}\n\nword{i} shared\n", encoding="utf-8")
    services.memory.sync()
    assert not store.postings._loaded, "an overlay past a quarter of the base asks for a reload"
    _compare(store, ["shared", "word3", "word33"])
    assert store.postings._loaded and store.postings._overlay_rows == 0


def test_a_querys_term_statistics_are_read_once_between_commits(
    sample_workspace: Path, services_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Searches repeat their words: a query's IDF is read from the ``dict`` table once until the next
    commit, which makes the next search read it again (a new note changes the document frequency)."""
    services = services_factory(sample_workspace)
    memory = services.memory
    memory.sync()
    reads: list[tuple[str, ...]] = []
    real = fts.query_weights

    def counted(con: Any, terms: Any) -> Any:
        reads.append(tuple(terms))
        return real(con, terms)

    monkeypatch.setattr(fts, "query_weights", counted)
    first = memory.search("billing database").results
    second = memory.search("billing database").results
    assert len(reads) == 1 and [h.parts.score for h in first] == [h.parts.score for h in second]
    (sample_workspace / "memory" / "billing-notes.md").write_text(
        "# Billing\n\nThe billing database moved; billing runs nightly.\n", encoding="utf-8"
    )
    memory.sync()
    third = memory.search("billing database").results
    assert len(reads) == 2, "a commit: read again"
    assert any(h.path == "memory/billing-notes.md" for h in third)
    store = memory.indexer.store
    reader = store.reader()
    try:
        fresh = real(reader, query_terms("billing database"))
    finally:
        reader.close()
    assert fresh is not None
    assert store.counts_memo.weights(tuple(query_terms("billing database")), lambda: None) == fresh
