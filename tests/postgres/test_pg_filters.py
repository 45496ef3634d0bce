"""Filtered searches on the PostgreSQL engine (mnemo.index.pg_filters): a filter's ids are kept per
process until the generation changes (a front-matter edit included), and a nearest-neighbour search over
many of them filters inside the HNSW scan, finding what the exact search by id finds. A query's term
statistics are kept the same way, until a write changes the postings; the candidates' vectors come with
their rows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import numpy as np
import psycopg
import pytest

from mnemo.index import pg_reader, pg_schema, pg_terms
from mnemo.index.pg_filters import FilteredIds
from mnemo.index.pg_indexer import PgIndexer
from mnemo.search.filters import SearchFilters
from mnemo.services import build_services
from tests.postgres.helpers import synced_indexer


@pytest.fixture
def indexer(tmp_path: Path, pg_dsn: str, namespace: str) -> Iterator[PgIndexer]:
    with synced_indexer(tmp_path, pg_dsn, namespace) as built:
        yield built


@pytest.mark.parametrize(
    "chunk_filter",
    [
        SearchFilters(kinds=("daily",)),
        SearchFilters(since=date(2026, 2, 1)),
        SearchFilters(kinds=("evergreen",)),
    ],
    ids=["kinds", "since (front matter joined)", "front matter dates"],
)
def test_many_filtered_ids_are_searched_by_the_hnsw_scan_with_the_filter(
    indexer: PgIndexer, chunk_filter: SearchFilters, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_reader, "EXACT_FILTERED", 10)  # this workspace's few ids count as many
    store = indexer.store
    assert store is not None and pg_schema.has_vector_index(store.con, store.g)
    query = np.asarray(indexer.embedder.embed(["deploy billing ledger rollout"])[0], dtype=np.float32)
    with indexer.reading() as reader:
        assert reader is not None
        allowed = reader.allowed_ids(chunk_filter)
        assert isinstance(allowed, FilteredIds) and 10 < len(allowed) < reader.counts().chunks
        scanned = reader.nearest(query, 10, within=allowed)
        exact = reader.nearest(query, 10, within=allowed.tolist())  # a plain list: by id
    assert {h.chunk_id for h in scanned} <= set(allowed.tolist())
    assert len(scanned) == 10
    distances = [round(h.distance, 6) for h in exact]
    assert [round(h.distance, 6) for h in scanned] == distances  # the same neighbours (ties aside)


def test_a_filters_ids_are_read_once_until_the_generation_changes(indexer: PgIndexer) -> None:
    daily = SearchFilters(kinds=("daily",))
    with indexer.reading() as reader:
        assert reader is not None
        first = reader.allowed_ids(daily)
    with indexer.reading() as reader:  # another snapshot, another search: the same array
        assert reader is not None
        again = reader.allowed_ids(daily)
        other = reader.allowed_ids(SearchFilters(kinds=("evergreen",)))
    assert (
        isinstance(first, FilteredIds) and isinstance(again, FilteredIds) and isinstance(other, FilteredIds)
    )
    assert again.ids is first.ids and not set(other.tolist()) & set(first.tolist())
    root = indexer.workspace.root
    (root / "memory" / "2027-01-01.md").write_text("# New day\n\nThe quota broker moved.\n", encoding="utf-8")
    indexer.sync()
    with indexer.reading() as reader:
        assert reader is not None
        after = reader.allowed_ids(daily)
    assert isinstance(after, FilteredIds) and after.ids is not first.ids and len(after) == len(first) + 1


def test_a_querys_term_statistics_are_read_once_until_a_write(
    indexer: PgIndexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[tuple[str, ...]] = []
    real = pg_terms.query_weights

    def counting(con: object, generation: int, terms: list[str]) -> object:
        read.append(tuple(terms))
        return real(con, generation, terms)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_terms, "query_weights", counting)

    def top(query: list[str]) -> list[tuple[int, float]]:
        with indexer.reading() as reader:  # a snapshot of its own, as each search has
            assert reader is not None
            return [(h.chunk_id, round(h.bm25, 9)) for h in reader.keyword_top(query, 5)]

    first = top(["quota", "broker"])
    assert first and top(["quota", "broker"]) == first
    assert top(["zebracornx"]) == [] and top(["zebracornx"]) == []
    assert read == [("quota", "broker"), ("zebracornx",)], "each query's statistics read once"
    root = indexer.workspace.root
    (root / "memory" / "2027-01-02.md").write_text(
        "# Quota\n\nquota quota broker zebracornx\n", encoding="utf-8"
    )
    indexer.sync()
    read.clear()
    after = top(["quota", "broker"])
    assert read == [("quota", "broker")], "a write moved the postings on: read again"
    assert after != first and top(["zebracornx"]), "and the new statistics and chunk count"


def _counting_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement run from now on (until ``monkeypatch.undo()``), in order."""
    statements: list[str] = []
    real = psycopg.Cursor.execute

    def counted(self: psycopg.Cursor[object], sql: object, *rest: object, **kw: object) -> object:
        statements.append(str(sql))
        return real(self, sql, *rest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    return statements


def test_the_candidates_vectors_come_with_their_rows_in_one_round_trip(
    indexer: PgIndexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with indexer.reading() as reader:
        assert reader is not None
        rows = reader.con.execute("SELECT id FROM mnemo.chunks WHERE g = %s ORDER BY id LIMIT 12", [reader.g])
        ids = [int(row[0]) for row in rows]
        separately = reader.vectors(ids)  # nothing read with rows yet: its own query
    assert len(separately) == len(ids)
    with indexer.reading() as reader:
        assert reader is not None
        statements = _counting_statements(monkeypatch)
        records = reader.records(ids)
        assert len(statements) == 1 and all(record.embedding is None for record in records.values())
        vectors = reader.vectors(ids[::2])
        assert len(statements) == 1, "the vectors came with the rows"
        reader.vectors([*ids[:2], max(ids) + 1000])  # one not read with the rows: asked for
        assert len(statements) == 2
        monkeypatch.undo()
    assert set(vectors) == set(ids[::2])
    for cid, vector in vectors.items():
        assert np.array_equal(vector, separately[cid])


def test_the_rows_leave_out_the_vectors_of_the_chunks_a_nearest_search_returned(
    indexer: PgIndexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search reads its candidates' rows right after them: the vector candidates' distance is known,
    so only the others' vectors come with the rows; a vector asked for anyway is read, and
    ``with_vectors`` still has every one."""
    query = np.asarray(indexer.embedder.embed(["deploy billing ledger rollout"])[0], dtype=np.float32)
    with indexer.reading() as reader:
        assert reader is not None
        near = [hit.chunk_id for hit in reader.nearest(query, 5)]
        rows = reader.con.execute("SELECT id FROM mnemo.chunks WHERE g = %s ORDER BY id", [reader.g])
        others = [cid for (cid,) in rows if cid not in near][:5]
        everything = reader.records([*near, *others], with_vectors=True)
    with indexer.reading() as reader:
        assert reader is not None
        assert [hit.chunk_id for hit in reader.nearest(query, 5)] == near
        statements = _counting_statements(monkeypatch)
        records = reader.records([*near, *others])
        assert reader.vectors(others) and len(statements) == 1, "the others' vectors came with the rows"
        asked = reader.vectors(near[:2])
        assert len(statements) == 2, "a returned chunk's vector is read when asked for"
        monkeypatch.undo()
        again = reader.records(near, with_vectors=True)
    assert set(records) == {*near, *others}
    for cid in near[:2]:
        assert np.array_equal(asked[cid], everything[cid].embedding)
    assert all(np.array_equal(again[cid].embedding, everything[cid].embedding) for cid in near)


def test_a_snapshot_begins_with_the_hnsw_settings_and_a_wider_search_sets_its_own(
    indexer: PgIndexer, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = np.asarray(indexer.embedder.embed(["deploy billing ledger rollout"])[0], dtype=np.float32)
    with indexer.reading() as reader:
        assert reader is not None
        settings = reader.con.execute(
            "SELECT current_setting('hnsw.iterative_scan'), current_setting('hnsw.ef_search')"
        )
        assert settings.fetchone() == ("relaxed_order", str(pg_reader.HNSW_EF_SEARCH))
        statements = _counting_statements(monkeypatch)
        assert len(reader.nearest(query, 10)) == 10
        assert not [sql for sql in statements if "set_config" in sql], "no round trip to set them"
        wide = pg_reader.HNSW_EF_SEARCH + 20
        assert len(reader.nearest(query, wide)) == min(wide, reader.counts().chunks)
        assert [sql for sql in statements if "set_config" in sql], "a wider search sets its own breadth"
        monkeypatch.undo()
        assert reader.con.execute("SELECT current_setting('hnsw.ef_search')").fetchone() == (str(wide),)
    with indexer.readers.snapshot() as con:  # SET LOCAL: nothing left over from the last snapshot
        assert con.execute("SELECT current_setting('hnsw.ef_search')").fetchone() == (
            str(pg_reader.HNSW_EF_SEARCH),
        )


def test_a_front_matter_edit_alone_changes_what_a_filter_allows(team_workspace: Path) -> None:
    """Front matter is not chunked: changing only the tags changes no posting, yet a tag filter must
    follow at once (the processes' kept ids are dropped when the front matter changes)."""
    note = team_workspace / "memory" / "tagged.md"
    note.write_text("---\ntags: [alpha]\n---\n# Tagged\n\nThe zebracorn ledger.\n", encoding="utf-8")
    services = build_services(team_workspace, provider="none")
    try:
        memory = services.memory
        memory.sync()

        def tagged(tag: str) -> list[str]:
            return [
                h.path
                for h in memory.search("zebracorn ledger", record=False, filters={"tags": [tag]}).results
            ]

        assert tagged("alpha") == ["memory/tagged.md"] and tagged("beta") == []
        note.write_text("---\ntags: [beta]\n---\n# Tagged\n\nThe zebracorn ledger.\n", encoding="utf-8")
        memory.sync()
        assert tagged("alpha") == [] and tagged("beta") == ["memory/tagged.md"]
    finally:
        services.close()


def test_the_kept_ids_are_bounded_least_recently_used_first() -> None:
    from mnemo.index.pg_filters import AllowedMemo

    memo = AllowedMemo(capacity=100)
    memo.put((1, "a", ""), 7, np.arange(40))
    memo.put((1, "b", ""), 7, np.arange(40))
    assert memo.get((1, "a", ""), 7) is not None  # a is now the most recently used
    memo.put((1, "c", ""), 7, np.arange(40))  # 120 > 100: b goes
    assert memo.get((1, "b", ""), 7) is None and memo.get((1, "a", ""), 7) is not None
    assert memo.get((1, "c", ""), 7) is not None
    memo.put((1, "huge", ""), 7, np.arange(60))  # over half the capacity: not kept at all
    assert memo.get((1, "huge", ""), 7) is None and memo.get((1, "a", ""), 7) is not None
    assert memo.get((1, "a", ""), 8) is None  # another version of the generation: a miss
